#!/usr/bin/env bash
# The CPU benchmark against PyTorch 2 on a machine without alphast's build
# dependencies (issue 13: the `device` tool's 16-core Xeon with torch 2.11).
#
#   scripts/device-bench.sh bundle [BUILD_DIR] [--cluster]
#       here: builds bench/bench_model and alphast-run in BUILD_DIR (default
#       _build) and packs them, the plugins and the shared libraries they
#       need (OpenBLAS, libyaml, libltdl, cJSON, libhdf5, Lua, ...) into
#       .device/bundle.tar.xz (git-ignored), the folder to carry.
#       --cluster adds this machine's Open MPI, Slurm and munge (their
#       Debian packages' files under root/, relocated there by OPAL_PREFIX,
#       PATH and LD_LIBRARY_PATH) for the scaling runs of issue 14.
#   scripts/device-bench.sh run OUT_DIR [THREADS...]
#       there: for each thread count (default 1 2 4 8 16) times the PyTorch
#       twin (python3 with torch) and then alphast on the same sizes, side by
#       side (bench_model --compare), writing pytorch-T.json, alphast-T.json
#       and the printed tables to OUT_DIR. BENCH_ARGS adds options to both
#       (default: --sections demo,reference,sample --steps 8 --warmup 2;
#       sample: 50 network evaluations of reverse diffusion per config, both
#       sides' samplers, cells per second side by side).
#   scripts/device-bench.sh gemm OUT_DIR [THREADS...]
#       there: for each thread count (default 1 4 16) the reference model's
#       float32 GEMM shapes on OpenBLAS and on oneDNN (bench_model --sections
#       gemm), then the reference baseline's step and eval forward with
#       ALPHAST_GEMM=openblas, onednn and auto, into OUT_DIR/gemm-T.{txt,json}
#       and OUT_DIR/model-T-LIB.{txt,json} (docs/benchmarks.md, "float32 GEMMs").
#   scripts/device-bench.sh sweeps OUT_DIR [JOBSxTHREADS...]
#       there: runs the quickstart's ablation (scripts/ablation.lua, 15 runs)
#       once per layout (default 16x1 4x4 1x16) and prints runs per hour.
#   scripts/device-bench.sh matrix OUT_DIR [DATA:SPLIT[:RECIPE]...]
#       there: the ablation (scripts/ablation.lua, 4 configs x 3 seeds) per
#       bundled dataset and held-out protocol (default: visium, starmap and
#       osmfish under random, blocks and slab, and starmap's z-sections), 4
#       sweeps at a time of 4 one-thread runs each (MATRIX_PARALLEL sweeps);
#       RECIPE `previous` runs the recipe before issue 23, `screen` the
#       Baseline model under the candidate recipes. Each sweep's
#       report.md lands in OUT_DIR/DATA-SPLIT[-RECIPE]/ (docs/evaluation.md).
#       ALPHAST_ONLY=cfg,cfg keeps those configs; ALPHAST_DEVICE=cuda (from a
#       cuda-bundle) trains and samples every run on the GPU.
#   scripts/device-bench.sh cluster OUT_DIR
#       there, from a --cluster bundle of an MPI build: one training run at
#       1, 2, 4, 8 MPI ranks against one 16-thread process
#       (scripts/mpi-scaling.sh), then the quick ablation's runs per hour,
#       local executor against Slurm executor on a one-node cluster
#       (scripts/sweep-throughput.sh), into OUT_DIR/cluster.txt.
#   scripts/device-bench.sh cuda-bundle [BUILD_DIR] [--mpi]
#       here: configures BUILD_DIR (default _build-cuda) --with-cuda, builds
#       alphast-run, bench_model, the CUDA test programs and the plugins, and
#       packs them (the executables themselves, not libtool's wrappers) with
#       every shared library they load but libc, libm and libcuda (the
#       driver's, which the GPU machine has) into .device/bundle.tar.xz;
#       fails when that and the tracked tree pass 64 MiB (what a device call
#       carries). --mpi: BUILD_DIR configured --with-cuda --with-mpi, and
#       this machine's Open MPI packed as bundle's --cluster packs it (without
#       Slurm); NCCL (over 200 MiB) is not packed but taken there from the
#       CUDA toolkit or PyTorch's nvidia-nccl wheel.
#   scripts/device-bench.sh cuda-run OUT_DIR [PARTS...]
#       there: nvidia-smi -L, then the parts (default: all, in this order;
#       each fits the device's 600 s per call):
#         tests  test_cuda_ops, test_cuda_model, test_cuda_train, test_cuda_sample (Criterion logs)
#         train  a short `alphast-run train device=cuda` of each config, its
#                step as a CUDA graph and op by op
#         bench  bench_model --device cuda beside torch_bench.py --device cuda:
#                the four configs at B=4 and B=32 (reference size)
#         cells  the gated model, G=200, one set of 4k ... 128k cells, both
#         sample reverse-diffusion throughput, beside the twin's sampler
#         mpi    (a --mpi bundle) tests/test_mpi_cuda.sh: two MPI ranks
#                on the GPU(s) against one process, kill -9 and resume, a
#                failing rank, the split evaluation
#         scaling (a --mpi bundle) one run over 1, 2, ... GPUs, one rank
#                each (scripts/mpi-scaling.sh DEVICE=cuda), at the reference
#                size (B=32) and with one set of 32,768 cells per rank; the
#                configs of CUDA_SCALING_CONFIGS (default baseline gated_moe)
#         mps    tests/test_sweep_mps.sh, then the quick-start ablation on the
#                GPU with the sweep's CUDA MPS daemon and without (--mps off)
#       and a short table last. Logs and JSON in OUT_DIR.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

# The files of the Debian packages the scale-out runs need, at their paths
# under DEST/root, and the libraries they and their dlopened plugins load.
mpi_packages=(openmpi-bin libopenmpi3 openmpi-common libpmix2)
cluster_packages=("${mpi_packages[@]}" slurm-client slurmctld slurmd slurm-wlm-basic-plugins munge libmunge2 iproute2)
pack_cluster() { # dest [packages...] (default: cluster_packages)
  local dest=$1 p f
  shift
  local packages=("$@")
  ((${#packages[@]})) || packages=("${cluster_packages[@]}")
  for p in "${packages[@]}"; do
    dpkg -L "$p" | grep -vE '/share/(doc|man|lintian|bug)/' | while read -r f; do
      if [ -f "$f" ]; then install -D -m "$(stat -c %a "$f")" "$f" "$dest/root$f"; fi
    done
  done
  # Debian names the daemons through update-alternatives (slurmctld ->
  # slurmctld-wlm), links dpkg -L does not list.
  for f in "$dest"/root/usr/sbin/*-wlm; do if [ -e "$f" ]; then ln -sf "${f##*/}" "${f%-wlm}"; fi; done
  # ldd fails on the scripts and data files among them: only its output counts.
  { find "$dest/root" -type f \( -name '*.so*' -o -perm -u+x \) -exec ldd {} + 2>/dev/null || true; } |
    awk '/=> \// { print $3 }' | grep -vE '/(libc|libm|libpthread|libdl|libresolv|ld-linux)[.-]' |
    sort -u | while read -r lib; do if [ ! -e "$dest/lib/${lib##*/}" ]; then cp -L "$lib" "$dest/lib/"; fi; done
}

# .device/ (the bundle) stays out of git: in the checkout's exclude file,
# which a worktree's .git (a file, not a folder) names.
ignore_device() {
  local exclude
  exclude=$(cd "$top" && git rev-parse --path-format=absolute --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")" "$top/.device"
  grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >>"$exclude"
}

collect() { # build-dir [--cluster]
  local build=$1 cluster=${2:-}
  make -C "$build" -j"$(nproc)" bench/bench_model alphast-run >/dev/null
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
  cp "$build/alphast-run" "$bundle/alphast-run"
  find "$build/plugins" -path '*/.libs/*.so' -exec cp {} "$bundle/plugins/" \;
  # Every library but the C library's own, which the other machine has.
  ldd "$bundle/bench_model" "$bundle/alphast-run" | awk '/=> \// { print $3 }' | grep -vE '/(libc|libm|libpthread|libdl|ld-linux)[.-]' |
    sort -u | while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
  [ "$cluster" = --cluster ] && pack_cluster "$bundle"
  ignore_device
  tar -C "$bundle" -cJf "$top/.device/bundle.tar.xz" .
  rm -rf "$bundle"
  du -sh "$top/.device/bundle.tar.xz"
}

# ---- CUDA: a --with-cuda build carried to the GPU machine ------------------

cuda_tests=(tests/test_cuda_ops tests/test_cuda_model tests/test_cuda_train tests/test_cuda_sample)

# plugin_targets: the build's plugin libraries, as make names them.
plugin_list() { # build-dir
  plugin_targets=$(make -s -C "$1" -f - print-plugins <<'EOF'
include Makefile
print-plugins:
	@echo $(plugin_LTLIBRARIES)
EOF
)
}

# The executable itself: libtool's .libs/ one where the build has a wrapper.
real_exe() { # build-dir path
  local dir file
  dir=$(dirname "$2") file=$(basename "$2")
  if [ -x "$1/$dir/.libs/$file" ]; then echo "$1/$dir/.libs/$file"; else echo "$1/$2"; fi
}

cuda_collect() { # build-dir [--mpi]
  local build=$1 mpi=${2:-}
  if [ ! -f "$build/Makefile" ]; then
    mkdir -p "$build"
    (cd "$build" && "$top/configure" -q --with-cuda ${mpi:+--with-mpi})
  fi
  if [ -n "$mpi" ]; then
    grep -q '^DEFS = .*-DALPHAST_HAVE_MPI=1' "$build/Makefile" ||
      { echo "cuda-bundle --mpi: $build is not configured --with-mpi" >&2; exit 1; }
  fi
  grep -q '^DEFS = .*-DAST_HAVE_CUDA=1' "$build/Makefile" ||
    { echo "cuda-bundle: $build is not configured --with-cuda (nvcc and cuBLAS in /usr/local/cuda)" >&2; exit 1; }
  plugin_list "$build"
  # shellcheck disable=SC2086 # a list of targets
  make -C "$build" -j"$(nproc)" alphast-run bench/bench_model "${cuda_tests[@]}" $plugin_targets >/dev/null
  local bundle exe
  bundle=$(mktemp -d)
  mkdir -p "$bundle/lib" "$bundle/plugins" "$bundle/tests"
  cp "$(real_exe "$build" alphast-run)" "$bundle/alphast-run"
  cp "$(real_exe "$build" bench/bench_model)" "$bundle/bench_model"
  for exe in "${cuda_tests[@]}"; do cp "$(real_exe "$build" "$exe")" "$bundle/$exe"; done
  find "$build/plugins" -path '*/.libs/*.so' -exec cp {} "$bundle/plugins/" \;
  # Their debug information would take a fifth of what a call carries; the
  # symbols (backtraces) stay.
  strip --strip-debug "$bundle"/alphast-run "$bundle"/bench_model "$bundle"/tests/* "$bundle"/plugins/*.so
  # Every library they load but the C library's, the GPU driver's and the
  # CUDA toolkit's (cuBLAS alone is over the 64 MiB a call carries; the GPU
  # machine has CUDA 13's, found by unpack).
  ldd "$bundle"/alphast-run "$bundle"/bench_model "$bundle"/tests/* "$bundle"/plugins/*.so | awk '/=> \// { print $3 }' |
    grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux|libcuda|libcublas|libcublasLt|libcudart|libnccl)[.-]' | sort -u |
    while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
  [ "$mpi" = --mpi ] && pack_cluster "$bundle" "${mpi_packages[@]}"
  ignore_device
  tar -C "$bundle" -cJf "$top/.device/bundle.tar.xz" .
  rm -rf "$bundle"
  local tracked total
  tracked=$(cd "$top" && git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
  total=$((tracked + $(stat -c %s "$top/.device/bundle.tar.xz")))
  echo "bundle $(du -h "$top/.device/bundle.tar.xz" | cut -f1); with the tracked tree $((total >> 20)) MiB of 64"
  ((total < 64 << 20)) || { echo "cuda-bundle: over the 64 MiB a device call carries" >&2; exit 1; }
}

cuda_tests_part() { # out
  local out=$1 t rc=0
  for t in "${cuda_tests[@]}"; do
    # the plugins come from ALPHAST_PLUGIN_PATH (unpack), the data from the tree
    ALPHAST_TEST_DATA=$top/tests/data "$bundle/$t" --verbose >"$out/${t#tests/}.log" 2>&1 || rc=1
    echo "${t#tests/}: $(grep -E '^\[====\] Synthesis' "$out/${t#tests/}.log" | tail -1)"
  done
  return $rc
}

# The quickstart's data (configs/visium.yaml), one epoch per config, its
# step as a CUDA graph where it can be (training.cuda_graph, the default)
# and op by op: steps per second of both and whether their losses agree.
# CUDA_TRAIN_ARGS adds overrides (loss.position_loss=distance: the default
# aligned loss is computed on the host, which keeps the step op by op).
cuda_train_part() { # out
  local out=$1 c mode
  local -A overrides=([baseline]="attention=linear ffn=dense" [gated]="attention=gated attention.gate_type=headwise"
    [moe]="ffn=moe ffn.num_experts=4 ffn.top_k=2" [gated_moe]="attention=gated ffn=moe ffn.num_experts=4 ffn.top_k=2")
  for c in baseline gated moe gated_moe; do
    for mode in true false; do
      local dir=$out/train-$c-graph-$mode
      # shellcheck disable=SC2086 # the overrides are words
      if (cd "$top" && XDG_CACHE_HOME=$out/cache "$bundle/alphast-run" train --config configs/visium.yaml \
        --out "$dir" device=cuda training.epochs=1 training.cuda_graph=$mode ${overrides[$c]} ${CUDA_TRAIN_ARGS:-} >"$dir.log" 2>&1); then
        echo "train $c cuda_graph=$mode: ok, $(grep -o '"steps_per_second":[^,}]*' "$dir/summary.json" 2>/dev/null)" \
          "$(grep -o 'captured as a CUDA graph\|runs op by op[^;]*' "$dir.log" | head -1)"
      else
        echo "train $c cuda_graph=$mode: FAILED"
        tail -3 "$dir.log"
      fi
    done
    if cmp -s <(grep -o '"loss":[^,]*' "$out/train-$c-graph-true/metrics.jsonl") \
      <(grep -o '"loss":[^,]*' "$out/train-$c-graph-false/metrics.jsonl"); then
      echo "train $c: the same losses with and without the graph"
    else
      echo "train $c: the losses DIFFER with and without the graph"
    fi
  done
}

# bench_model and the twin on the same sections, side by side.
cuda_bench_part() { # out name sections [options...]
  local out=$1 name=$2 sections=$3
  shift 3
  python3 "$top/bench/torch_bench.py" --device cuda --sections "$sections" "$@" --json "$out/pytorch-$name.json" \
    >"$out/pytorch-$name.txt" 2>&1 || tail -5 "$out/pytorch-$name.txt"
  "$bundle/bench_model" --device cuda --sections "$sections" "$@" --json "$out/alphast-$name.json" \
    --compare "$out/pytorch-$name.json" >"$out/alphast-$name.txt" 2>&1 || tail -5 "$out/alphast-$name.txt"
}

cuda_table() { # out
  local out=$1 f
  echo "== summary ($out)"
  for f in "$out"/*.log; do [ -f "$f" ] && grep -H -E '^\[====\] Synthesis' "$f" | sed "s|$out/||"; done
  for f in "$out"/alphast-*.txt; do [ -f "$f" ] && sed -n '/alphast vs PyTorch twin/,$p; /== sampling/,/^results/p' "$f"; done
  return 0
}

# One GPU scaling run: scripts/mpi-scaling.sh at SHAPE with the config's
# overrides, into OUT/scaling-SHAPE-NAME.txt.
cuda_scaling_run() { # out shape name steps overrides...
  local out=$1 shape=$2 name=$3 steps=$4
  shift 4
  echo "--- scaling, $shape, $name"
  STEPS=$steps DEVICE=cuda SHAPE=$shape ALPHAST_RUN=$bundle/alphast-run OUT=$out/scaling-$shape-$name \
    bash "$top/scripts/mpi-scaling.sh" "$@" 2>&1 | tee "$out/scaling-$shape-$name.txt" ||
    echo "scaling $shape $name failed"
  rm -f "$out/scaling-$shape-$name"/*.csv
}

# The GPU scaling runs: each config at the reference size, then the gated
# model (mpi-scaling.sh's SHAPE=cells) with 32k-cell sets.
cuda_scaling_part() { # out
  local out=$1 c args
  for c in ${CUDA_SCALING_CONFIGS:-baseline gated_moe}; do
    case $c in
      baseline) args=() ;;
      gated) args=(attention=gated) ;;
      moe) args=(ffn=moe) ;;
      gated_moe) args=(attention=gated ffn=moe) ;;
      *) echo "cuda-run: CUDA_SCALING_CONFIGS: no config '$c'" >&2; return 2 ;;
    esac
    cuda_scaling_run "$out" reference "$c" 30 "${args[@]}"
  done
  cuda_scaling_run "$out" cells gated 10 # 2 s a step at 32k cells
}

# The quick-start ablation (scripts/ablation.lua, 15 runs) on the GPU, with
# the sweep's CUDA MPS daemon and without: wall time and nvidia-smi's
# utilisation sampled every 0.5 s.
cuda_ablation_run() { # out mps
  local out=$1 mps=$2 t0 t1 rc=0 smi
  (while sleep 0.5; do nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits; done \
    >"$out/smi-ablation-mps-$mps.txt" 2>/dev/null) &
  smi=$!
  # the configs beside the script, one level under the tree (their data paths
  # are ../data/...): the bundle's shipped-configs path is this machine's
  mkdir -p "$top/.ablation-gpu"
  cp "$top/scripts/ablation.lua" "$top"/configs/*.yaml "$top/.ablation-gpu/"
  t0=$(date +%s.%N)
  (cd "$top" && ALPHAST_DEVICE=cuda XDG_CACHE_HOME=$out/cache "$bundle/alphast-run" sweep .ablation-gpu/ablation.lua \
    --mps "$mps" -o "$out/ablation-mps-$mps" >"$out/ablation-mps-$mps.log" 2>&1) || rc=$?
  t1=$(date +%s.%N)
  kill $smi
  echo "ablation on the GPU, --mps $mps: rc $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s," \
    "$(awk '{s += $1; n++} END {printf "GPU %.0f %% busy (mean of %d samples)", s / n, n}' "$out/smi-ablation-mps-$mps.txt")"
}

cuda_mps_part() { # out
  ALPHAST_RUN=$bundle/alphast-run bash "$top/tests/test_sweep_mps.sh" 2>&1 | tee "$1/test_sweep_mps.log"
  cuda_ablation_run "$1" auto
  cuda_ablation_run "$1" off
}

cuda_run() { # out parts...
  local out=$1
  shift
  local parts=("$@") p steps=${CUDA_BENCH_STEPS:-10}
  ((${#parts[@]})) || parts=(tests train bench cells sample)
  mkdir -p "$out"
  unpack
  { nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'; } |
    tee "$out/machine.txt" || true
  for p in "${parts[@]}"; do
    echo "=== $p"
    case $p in
      tests) cuda_tests_part "$out" || echo "tests: FAILED (see $out/test_cuda_*.log)" ;;
      train) cuda_train_part "$out" ;;
      bench) cuda_bench_part "$out" bench reference,reference32 --steps "$steps" --warmup 3 ;;
      cells) cuda_bench_part "$out" cells cells --max-cells 131072 --budget 60 ;;
      sample) cuda_bench_part "$out" sample sample --warmup 3 ;;
      mpi) ALPHAST_RUN=$bundle/alphast-run MPIRUN=$(command -v mpirun) bash "$top/tests/test_mpi_cuda.sh" 2>&1 |
             tee "$out/test_mpi_cuda.log" ;;
      scaling) cuda_scaling_part "$out" ;;
      mps) cuda_mps_part "$out" ;;
      *) echo "cuda-run: unknown part '$p' (tests train bench cells sample mpi scaling mps)" >&2; exit 2 ;;
    esac
  done
  cuda_table "$out"
}

unpack() { # sets bundle and the environment
  bundle=/tmp/alphast-bundle
  mkdir -p "$bundle"
  # Once per bundle, under a lock: parts run side by side (cuda-run beside a
  # matrix) would otherwise rewrite an executable another one is running
  # ("Text file busy").
  (
    flock 9
    if [ ! -e "$bundle/.unpacked" ] || [ "$top/.device/bundle.tar.xz" -nt "$bundle/.unpacked" ]; then
      tar -C "$bundle" -xJf "$top/.device/bundle.tar.xz" && touch "$bundle/.unpacked"
    fi
  ) 9>"$bundle.lock"
  # CUDA 13's cuBLAS, runtime and NCCL there: the toolkit's, else PyTorch's wheels'.
  local cuda_libs nccl_lib
  cuda_libs=$(python3 -c 'import nvidia.cublas as b, nvidia.cuda_runtime as r; print(list(b.__path__)[0] + "/lib:" + list(r.__path__)[0] + "/lib")' 2>/dev/null || true)
  nccl_lib=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0] + "/lib")' 2>/dev/null || true)
  cuda_libs=$cuda_libs${nccl_lib:+:$nccl_lib}
  export LD_LIBRARY_PATH=$bundle/lib:/usr/local/cuda/lib64${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export ALPHAST_PLUGIN_PATH=$bundle/plugins PYTHONUNBUFFERED=1
  if [ -d "$bundle/root" ]; then # the --cluster runtime, relocated
    local r=$bundle/root/usr
    export PATH=$r/bin:$r/sbin:$bundle/root/bin:$bundle/root/sbin:$PATH OPAL_PREFIX=$r
    export LD_LIBRARY_PATH=$r/lib/x86_64-linux-gnu:$r/lib/x86_64-linux-gnu/openmpi/lib:$r/lib/x86_64-linux-gnu/slurm-wlm:$LD_LIBRARY_PATH
    export SLURM_PLUGIN_DIR=$r/lib/x86_64-linux-gnu/slurm-wlm
  fi
}

sweeps() { # out layouts...
  local out=$1
  shift
  local layouts=("$@")
  ((${#layouts[@]})) || layouts=(16x1 4x4 1x16)
  unpack
  # The bundled binary cannot find the source tree's shipped configs, and
  # the script looks next to itself first: a folder beside configs/ keeps
  # the config's relative data path (../data/...) right.
  local here=$top/device-sweep
  mkdir -p "$here"
  cp "$top/scripts/ablation.lua" "$top"/configs/*.yaml "$here/"
  for l in "${layouts[@]}"; do
    local jobs=${l%x*} threads=${l#*x} t0 t1
    t0=$(date +%s.%N)
    (cd "$top" && XDG_CACHE_HOME=$out/cache "$bundle/alphast-run" sweep "$here/ablation.lua" -o "$out/sweep-$l" \
      --jobs "$jobs" --threads "$threads" >"$out/sweep-$l.log" 2>&1) || tail -5 "$out/sweep-$l.log"
    t1=$(date +%s.%N)
    # "ablation: 12/12 done (12 here, 0 before), ..." gives the runs this layout trained
    local n
    n=$(sed -n 's/.* done (\([0-9]*\) here.*/\1/p' "$out/sweep-$l.log" | tail -1)
    awk -v l="$l" -v n="${n:-0}" -v t0="$t0" -v t1="$t1" 'BEGIN { s = t1 - t0;
      printf "%-6s %d runs in %.1f s: %.0f runs per hour\n", l, n, s, n * 3600 / s }' | tee -a "$out/sweeps.txt"
  done
}

matrix_cell() { # out data:split[:recipe]
  local out=$1 data split recipe name
  IFS=: read -r data split recipe <<<"$2"
  name=$data-$split${recipe:+-$recipe}
  local screen=
  if [ "$recipe" = screen ]; then screen=1 recipe=; fi
  (cd "$top" && ALPHAST_DATA=$data ALPHAST_SPLIT=$split ALPHAST_RECIPE=$recipe ALPHAST_SCREEN=$screen ALPHAST_MAX_MINUTES=10 ALPHAST_ONLY=${ALPHAST_ONLY:-} ALPHAST_DEVICE=${ALPHAST_DEVICE:-} XDG_CACHE_HOME=$out/cache \
    "$bundle/alphast-run" sweep "$top/device-sweep/ablation.lua" -o "$out/$name" --jobs 4 --threads 1 \
    >"$out/$name.log" 2>&1) || { echo "$name failed:"; tail -5 "$out/$name.log"; }
  grep -E "^[^ ]+: [0-9]+/[0-9]+ done" "$out/$name.log" | tail -1
}

matrix() { # out cells...
  local out=$1
  shift
  local cells=("$@")
  ((${#cells[@]})) || cells=(visium:random visium:blocks visium:slab starmap:random starmap:blocks
    starmap:slab starmap:sections osmfish:random osmfish:blocks osmfish:slab)
  unpack
  mkdir -p "$top/device-sweep" "$out"
  cp "$top/scripts/ablation.lua" "$top"/configs/*.yaml "$top/device-sweep/"
  export -f matrix_cell
  export top bundle
  printf '%s\n' "${cells[@]}" | xargs -P "${MATRIX_PARALLEL:-4}" -I{} bash -c 'matrix_cell "$0" "$1"' "$out" {}
}

cluster() { # out
  local out=$1 here=$top/device-sweep
  unpack
  mkdir -p "$here"
  cp "$top/scripts/ablation.lua" "$top"/configs/*.yaml "$here/"
  {
    echo "== one run over MPI ranks"
    ALPHAST_RUN=$bundle/alphast-run bash "$top/scripts/mpi-scaling.sh" || echo "mpi-scaling failed"
    echo "== sweep throughput, local vs Slurm executor"
    ALPHAST_RUN=$bundle/alphast-run bash "$top/scripts/sweep-throughput.sh" "$here/ablation.lua" ||
      echo "sweep-throughput failed"
  } 2>&1 | tee "$out/cluster.txt"
}

run() { # out threads...
  local out=$1
  shift
  local threads=("$@")
  ((${#threads[@]})) || threads=(1 2 4 8 16)
  mkdir -p "$out"
  unpack
  local args=${BENCH_ARGS:---sections demo,reference,sample --steps 8 --warmup 2}
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

gemm() { # out threads...
  local out=$1 t lib
  shift
  local threads=("$@")
  ((${#threads[@]})) || threads=(1 4 16)
  mkdir -p "$out"
  unpack
  lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | cut -c1-300 | tee "$out/machine.txt"
  for t in "${threads[@]}"; do
    echo "=== $t threads"
    OPENBLAS_NUM_THREADS=$t "$bundle/bench_model" --sections gemm --steps 10 --json "$out/gemm-$t.json" 2>&1 |
      tee "$out/gemm-$t.txt"
    for lib in openblas onednn auto; do
      ALPHAST_GEMM=$lib OPENBLAS_NUM_THREADS=$t "$bundle/bench_model" --sections reference --configs baseline \
        --steps 5 --warmup 2 --json "$out/model-$t-$lib.json" 2>&1 | sed "s/^/$lib: /" | tee "$out/model-$t-$lib.txt"
    done
  done
}

case ${1:-} in
  bundle) collect "${2:-$top/_build}" "${3:-}" ;;
  run) shift; run "$@" ;;
  gemm) shift; gemm "$@" ;;
  sweeps) shift; mkdir -p "$1"; sweeps "$@" ;;
  matrix) shift; matrix "$@" ;;
  cluster) mkdir -p "$2"; cluster "$2" ;;
  cuda-bundle) cuda_collect "${2:-$top/_build-cuda}" "${3:-}" ;;
  cuda-run) shift; cuda_run "$@" ;;
  -h|--help) sed -n '2,70p' "$0"; exit 0 ;;
  *) sed -n '2,70p' "$0" >&2; exit 2 ;;
esac
