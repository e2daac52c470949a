#!/usr/bin/env bash
# The CPU benchmark against PyTorch 2 on a machine without alphast's build
# dependencies (issue 13: the `device` tool's 16-core Xeon with torch 2.11).
#
#   scripts/device-bench.sh bundle [BUILD_DIR]
#       here: builds bench/bench_model in BUILD_DIR (default _build) and
#       packs it, the plugins and the shared libraries it needs (OpenBLAS,
#       libyaml, libltdl, cJSON, libgfortran) into .device/bundle.tar.xz
#       (git-ignored; xz keeps it at a quarter of OpenBLAS's 35 MB), the
#       folder to carry.
#   scripts/device-bench.sh run OUT_DIR [THREADS...]
#       there: for each thread count (default 1 2 4 8 16) times the PyTorch
#       twin (python3 with torch) and then alphast on the same sizes, side by
#       side (bench_model --compare), writing pytorch-T.json, alphast-T.json
#       and the printed tables to OUT_DIR. BENCH_ARGS adds options to both
#       (default: --sections demo,reference --steps 8 --warmup 2).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

collect() { # build-dir
  local build=$1
  make -C "$build" -j"$(nproc)" bench/bench_model >/dev/null
  local plugins
  plugins=$(make -s -C "$build" -f - print-plugins <<'EOF'
include Makefile
print-plugins:
	@echo $(plugin_LTLIBRARIES)
EOF
)
  # shellcheck disable=SC2086 # a list of targets
  make -C "$build" -j"$(nproc)" $plugins >/dev/null
  local bundle
  bundle=$(mktemp -d)
  mkdir -p "$bundle/lib" "$bundle/plugins"
  local exe=$build/bench/bench_model
  [ -x "$build/bench/.libs/bench_model" ] && exe=$build/bench/.libs/bench_model
  cp "$exe" "$bundle/bench_model"
  find "$build/plugins" -path '*/.libs/*.so' -exec cp {} "$bundle/plugins/" \;
  # Every library but the C library's own, which the other machine has.
  ldd "$bundle/bench_model" | awk '/=> \// { print $3 }' | grep -vE '/(libc|libm|libpthread|libdl|ld-linux)[.-]' |
    while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
  mkdir -p "$top/.git/info" "$top/.device"
  grep -qx '/.device/' "$top/.git/info/exclude" 2>/dev/null || echo '/.device/' >>"$top/.git/info/exclude"
  tar -C "$bundle" -cJf "$top/.device/bundle.tar.xz" .
  rm -rf "$bundle"
  du -sh "$top/.device/bundle.tar.xz"
}

run() { # out threads...
  local out=$1
  shift
  local threads=("$@")
  ((${#threads[@]})) || threads=(1 2 4 8 16)
  mkdir -p "$out"
  local bundle=/tmp/alphast-bundle
  mkdir -p "$bundle"
  tar -C "$bundle" -xJf "$top/.device/bundle.tar.xz"
  export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export ALPHAST_PLUGIN_PATH=$bundle/plugins PYTHONUNBUFFERED=1
  local args=${BENCH_ARGS:---sections demo,reference --steps 8 --warmup 2}
  {
    lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Socket|Flags' | cut -c1-300
    python3 -c 'import torch; print("torch", torch.__version__, "MKL", torch.backends.mkl.is_available())' || true
  } | tee "$out/machine.txt"
  for t in "${threads[@]}"; do
    echo "=== $t threads"
    # shellcheck disable=SC2086 # options
    OPENBLAS_NUM_THREADS=$t python3 "$top/bench/torch_bench.py" $args --json "$out/pytorch-$t.json" \
      >"$out/pytorch-$t.txt" 2>&1 || tail -5 "$out/pytorch-$t.txt"
    # shellcheck disable=SC2086
    OPENBLAS_NUM_THREADS=$t "$bundle/bench_model" $args --json "$out/alphast-$t.json" \
      --compare "$out/pytorch-$t.json" 2>&1 | tee "$out/alphast-$t.txt"
  done
}

case ${1:-} in
  bundle) collect "${2:-$top/_build}" ;;
  run) shift; run "$@" ;;
  *) sed -n '2,17p' "$0" >&2; exit 2 ;;
esac
