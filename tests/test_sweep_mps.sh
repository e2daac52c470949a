#!/usr/bin/env bash
# Runs of a sweep that share a GPU, under the CUDA MPS daemon the sweep
# starts for them (cli/sweep_mps.h, docs/gpu.md "Sweeps on GPUs"). It checks
# that
#   1. two runs on one GPU with --mps on finish, and train to the same
#      losses as with --mps off (MPS shares the GPU; it changes no number);
#   2. the daemon's control log is kept as DIR/mps-control.log and its
#      directory in /tmp is gone when the sweep ends.
# Runs outside make check too: ALPHAST_RUN=path/alphast-run bash tests/test_sweep_mps.sh
# Skips (77) without a visible GPU or nvidia-cuda-mps-control on PATH.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
run=${ALPHAST_RUN:-${ALPHAST_BUILD_DIR:-$src/_build}/alphast-run}

skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[ -x "$run" ] || skip "no alphast-run at $run (set ALPHAST_RUN)"
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU' || skip "no GPU is visible (nvidia-smi -L lists none)"
command -v nvidia-cuda-mps-control >/dev/null || skip "no nvidia-cuda-mps-control on PATH"
[ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && ! [ -e /tmp/nvidia-mps/control ] || skip "an MPS daemon is already running here"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sweep() { # name mode
  "$run" sweep -m --mps "$2" --gpus 0 --runs-per-gpu 2 --jobs 2 --out "$tmp/$1" \
    --config "$src/tests/data/sweeps/tiny.yaml" device=cuda seed=1,2 training.epochs=3 >"$tmp/$1.txt" 2>&1 ||
    { cat "$tmp/$1.txt"; fail "the sweep with --mps $2 failed"; }
}
sweep on on
sweep off off
grep -q "2/2 done" "$tmp/on.txt" || fail "not every run is done: $(tail -3 "$tmp/on.txt")"
daemon=$(grep -o '/tmp/alphast-mps-[A-Za-z0-9]*' "$tmp/on.txt" | head -1)
[ -n "$daemon" ] || fail "the sweep did not say it started a daemon: $(head -5 "$tmp/on.txt")"
! [ -e "$daemon" ] || fail "$daemon is left after the sweep"
grep -q "alphast-mps" "$tmp/off.txt" && fail "--mps off started a daemon"
[ -s "$tmp/on/mps-control.log" ] || fail "no mps-control.log in the sweep directory"
grep -qi "server" "$tmp/on/mps-control.log" || fail "the control log shows no MPS server: $(cat "$tmp/on/mps-control.log")"
echo "--- the daemon's log"
cat "$tmp/on/mps-control.log"
for s in "$tmp"/on/runs/*/; do
  name=$(basename "$s")
  a=$(grep -o '"last_train_loss": *[-0-9.e]*' "$s/summary.json")
  b=$(grep -o '"last_train_loss": *[-0-9.e]*' "$tmp/off/runs/$name/summary.json")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$name: $a under MPS, $b without"
  echo "$name: $a with and without MPS"
done
echo "all passed"
