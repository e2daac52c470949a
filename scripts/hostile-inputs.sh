#!/usr/bin/env bash
# Feeds every reproducer of the reliability issue (a repro folder laid out as
# ../shared/repro: h5ad/ config/ lua/ csv/ forward/ checkpoint/ plugin/) to
# alphast-run, as a user would, and prints one Markdown table row per input:
# what alphast did with it and the first line it said. REPRO_DIR/round3/
# (issue 25: lua/ slurm/ schedule/ h5ad/ sample_diskfull/ init_from/ cache/
# atomic_write/ hydra/ plugin/ mpi/, described by its README.md) runs too
# when it is there; what needs a Slurm cluster or a tmpfs mount is skipped
# with a row saying so.
#
#   scripts/hostile-inputs.sh [REPRO_DIR]     (default: ../shared/repro)
#
# Outcomes:
#   error     exit status 1 or 2 with an "alphast-run: ..." message
#   ok        the input is valid and ran (only where that is what it should do)
#   CRASH     a signal or a sanitizer report not naming a plugin
#   HANG      still running after HOSTILE_TIMEOUT seconds (default 60)
#   WRONG     accepted although it should have been refused, or refused
#             although it is valid, or it said what it must not (blamed
#             the disk, wrote through a planted link, ...)
#   skipped   needs what this machine does not give (a cluster, a mount)
# The script exits 1 if any row is CRASH, HANG or WRONG.
#
# Environment: ALPHAST_RUN (default: _build-asan/alphast-run if built with
# sanitizers, else _build/alphast-run), HOSTILE_TIMEOUT. LSAN_OPTIONS
# defaults to make check's suppressions (tests/lsan.supp: libltdl's resident
# plugin handles, Open MPI's own leaks), so a sanitizer build reports only
# alphast's leaks.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
repro=$(cd "${1:-$top/../shared/repro}" && pwd) || exit 2
run=${ALPHAST_RUN:-}
[ -n "$run" ] || for b in "$top/_build-asan" "$top/_build"; do [ -x "$b/alphast-run" ] && { run=$b/alphast-run; break; }; done
[ -x "$run" ] || { echo "hostile-inputs: no alphast-run built (scripts/build.sh)" >&2; exit 2; }
limit=${HOSTILE_TIMEOUT:-60}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$top/tests/lsan.supp:print_suppressions=0}
work=$(mktemp -d "${TMPDIR:-/tmp}/alphast-hostile.XXXXXX")
trap 'rm -rf "$work"' EXIT
bad=0 rows=0

# The repro files point at /tmp/rel-cli and /tmp/rel: give them the bundled data.
cp -r "$repro"/. "$work/"
chmod -R u+w "$work"
for y in "$work"/tiny.yaml "$work"/*/tiny.yaml "$work"/round3/*/tiny.yaml; do
  [ -f "$y" ] || continue
  sed -i "s|path: .*starmap3d.h5ad|path: $top/data/starmap3d/starmap3d.h5ad|" "$y"
done
sed -i "s|/tmp/rel-cli/lua/|$work/lua/|; s|/tmp/rel-cli/|$work/|g" "$work"/lua/*.lua

# check KIND NAME EXPECT [SETUP ENV...] -- ARGS...: runs alphast-run ARGS in
# $here (default $work) and prints the row. EXPECT: error, ok, any (error
# or ok: a damaged input that may be refused or be harmless), warn (an
# error, or ok with a warning) or plugin (an error naming the plugin, which
# may end the process with the plugin's own signal). $work/err keeps what
# it said, for the checks of round 3 (wrong).
check() {
  local kind=$1 name=$2 expect=$3
  shift 3
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local t0 rc err outcome first
  t0=$(date +%s.%N)
  (cd "${here:-$work}" && env "${envs[@]}" timeout -s KILL "$limit" "$run" "$@" >"$work/out" 2>"$work/err") 2>/dev/null
  rc=$?
  local took
  took=$(echo "$(date +%s.%N) - $t0" | bc)
  # the error line: alphast-run's, else a plugin's report or a sanitizer's
  err=$(grep -m1 -E "^alphast-run: |plugin '|ERROR: |runtime error" "$work/err")
  [ -n "$err" ] || err=$(grep -v '^\s*$' "$work/err" | tail -1)
  if ((rc == 137)) && [ "$expect" != plugin ]; then outcome=HANG
  elif grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer' "$work/err" && [ "$expect" != plugin ]; then outcome=CRASH
  elif [ "$expect" = plugin ]; then
    grep -q "plugin '" "$work/err" && outcome=error || outcome=CRASH
  elif ((rc > 2)); then outcome=CRASH
  elif ((rc == 0)); then
    case $expect in ok | any) outcome=ok ;; warn) [ -s "$work/err" ] && outcome=ok || outcome=WRONG ;; *) outcome=WRONG ;; esac
  else
    case $expect in error | any | warn) outcome=error ;; *) outcome=WRONG ;; esac
  fi
  case $outcome in CRASH | HANG | WRONG) bad=$((bad + 1)) ;; esac
  rows=$((rows + 1))
  first=${err//|/\\|}
  first=${first//$work\//}
  printf '| %s | `%s` | %s | %.1f | %s |\n' "$kind" "$name" "$outcome" "$took" "${first:0:200}"
}

train() { echo train -q --config tiny.yaml --out "$work/run-$1"; }

echo "| kind | input | outcome | s | first line said |"
echo "|---|---|---|---|---|"
for f in "$work"/h5ad/*.h5ad "$work"/h5ad/*.fuzz; do
  n=$(basename "$f")
  cp "$f" "$work/h5ad/$n.h5ad"
  # shellcheck disable=SC2046
  check h5ad "$n" error ALPHAST_H5AD_TIMEOUT=10 -- $(train "$n") --data "h5ad/$n.h5ad"
done
for f in "$work"/csv/*; do
  n=$(basename "$f") data=$f
  [[ $n == *.fuzz ]] && { cp "$f" "$work/csv/$n.csv"; data=$work/csv/$n.csv; }
  # shellcheck disable=SC2046
  check csv "$n" error -- $(train "$n") --data "$data"
done
check config deep_nesting_30000.yaml error -- train -q --config config/deep_nesting_30000.yaml --out "$work/run-deep"
mapfile -t ov <"$work/config/override-dump-hang.fuzz"
# shellcheck disable=SC2046
check config override-dump-hang.fuzz error -- $(train ov) "${ov[@]}"
check config "sweep_nonutf8_key_double_free.lua" error -- sweep --dry-run -o "$work/sw-nonutf8" config/sweep_nonutf8_key_double_free.lua
# Restricted (the default): the scripts that run processes or write files
# are refused; l20 counts its own evaluations, so it needs the opt-in and
# must be evaluated once, not once per run.
for f in "$work"/lua/*.lua; do
  n=$(basename "$f" .lua)
  [ "$n" = l20_count_evals ] && continue
  check lua "$n.lua" error -- sweep -j 2 -o "$work/sw-$n" "lua/$n.lua"
done
check lua "l20_count_evals.lua (trusted)" ok -- sweep -j 2 -o "$work/sw-l20" --trust-script lua/l20_count_evals.lua
evals=$(wc -l <"$work/lua/eval_count.txt" 2>/dev/null || echo 0)
((evals == 1)) || { echo "| lua | \`l20_count_evals.lua\` | WRONG | | evaluated $evals times, not once |"; bad=$((bad + 1)); }

# A good run: its weights for forward, its checkpoint to damage.
(cd "$work" && $run train -q --config tiny.yaml --out "$work/run-good" training.epochs=1 >/dev/null 2>&1) ||
  { echo "hostile-inputs: the reference run failed" >&2; exit 2; }
for n in B0 N0; do
  check forward "in_$n.safetensors" error -- forward --config tiny.yaml --weights "$work/run-good/best.safetensors" \
    --inputs "forward/in_$n.safetensors" --out "$work/fw-$n.safetensors"
done

# Checkpoints: each damage of mk_ckpt_case.py on a copy,
# resumed as a user would. Every case must be refused (or, for a damage
# that leaves a valid file, resumed: none of these does).
for c in truncated hdrlen_huge overlap wrong_dtype shape_mismatch nan_weights empty not_json extra_tensor \
  missing_tensor meta_epoch=1e300 meta_metrics_bytes=1e11 meta_step=nan meta_epoch=-1 meta_step=DEL; do
  rm -rf "$work/run-ck" && cp -r "$work/run-good" "$work/run-ck"
  python3 "$work/checkpoint/mk_ckpt_case.py" "$c" "$work/run-ck/checkpoint.safetensors"
  check checkpoint "$c" error -- train -q --config tiny.yaml --out "$work/run-ck" training.epochs=3
done

# Plugins, built against the 2.0 headers they were written for; ffn_evil
# was written for ABI 1 (host->linear), so the tree's port of it is used.
mkdir -p "$work/plugins"
for f in "$work"/plugin/*.c; do
  [ "$(basename "$f")" = ffn_evil.c ] && continue
  cc -shared -fPIC -I"$top/tests/plugins/abi-2.0" -o "$work/plugins/$(basename "$f" .c).so" "$f"
done
cc -shared -fPIC -I"$top/include" -o "$work/plugins/ffn_evil.so" "$top/tests/plugins/ffn_evil.c"
printf 'not an ELF file\n' >"$work/plugins/ffn_text.so"
for p in badabi badsize noentry wrongname text; do
  check plugin "ffn_$p.so" error ALPHAST_PLUGIN_PATH="$work/plugins" -- $(train "p$p") ffn="$p"
done
for m in abort segv exit fpe; do
  check plugin "ffn_evil.so (EVIL_MODE=$m)" plugin ALPHAST_PLUGIN_PATH="$work/plugins" EVIL_MODE=$m -- $(train "e$m") ffn=evil
done

[ -d "$work/round3" ] && . "$top/scripts/hostile-round3.sh"

echo
echo "$rows inputs: $bad crashed, hung or were wrongly accepted"
((bad == 0))
