#!/usr/bin/env bash
# Sweep throughput, local executor against Slurm executor, on this machine:
# the same sweep run by each into a fresh directory, as many runs at a time
# as there are cores (one thread each), the Slurm one on a throwaway
# one-node cluster (scripts/slurm-local.sh, stopped on exit). Prints runs
# per hour of each, from start (submission) to the last run's end.
#
#   scripts/sweep-throughput.sh [SCRIPT.lua]   # default: the quick ablation
#
# SCRIPT defaults to scripts/ablation.lua with ALPHAST_QUICK=1 (15 runs of a
# few seconds: the executors' overhead shows); set ALPHAST_QUICK=0 for the
# full one. ALPHAST_RUN names the alphast-run to time (default _build's);
# TASKS=N sets the job array's size (default: one task per run, and tasks
# that start once every run is claimed only cost Slurm a launch each).
# Needs root (slurmd) and Debian's slurm-wlm and munge.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
run=${ALPHAST_RUN:-$src/_build/alphast-run}
script=${1:-$src/scripts/ablation.lua}
[ "${ALPHAST_QUICK:-1}" = 0 ] && unset ALPHAST_QUICK || export ALPHAST_QUICK=1
[ -x "$run" ] || { echo "sweep-throughput: $run not built (bash scripts/build.sh, or set ALPHAST_RUN)" >&2; exit 1; }
cores=$(nproc)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/alphast-throughput.XXXXXX")
chmod 755 "$tmp" # munged wants the directories above its socket searchable by all
trap 'bash "$src/scripts/slurm-local.sh" stop "$tmp/cluster" || true; rm -rf "$tmp"' EXIT

now() { date +%s.%N; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%d runs in %.1f s = %.0f runs/hour", n, s, 3600 * n / s }'; }
runs_done() { "$run" sweep --status "$1" | sed -n 's/.* runs: \([0-9]*\) done.*/\1/p'; }
# Seconds from $2 (Unix time) to the end of the last run the ledger of $1 records.
last_end() { grep -o '"end":[0-9.]*' "$1/ledger.jsonl" | cut -d: -f2 | sort -g | tail -n 1 | awk -v a="$2" '{ print $1 - a }'; }

start=$(now)
"$run" sweep --jobs "$cores" --threads 1 --out "$tmp/local" "$script" >"$tmp/local.log" 2>&1 ||
  { tail -n 20 "$tmp/local.log"; exit 1; }
local_s=$(awk -v a="$start" -v b="$(now)" 'BEGIN { print b - a }')
local_n=$(runs_done "$tmp/local")

eval "$(bash "$src/scripts/slurm-local.sh" start "$tmp/cluster")"
start=$(now)
out=$("$run" sweep --executor slurm --threads 1 ${TASKS:+--tasks "$TASKS"} --out "$tmp/slurm" "$script")
job=$(sed -n 's/.*submitted Slurm job array \([0-9]*\).*/\1/p' <<<"$out")
[ -n "$job" ] || { echo "$out"; exit 1; }
while squeue -h -j "$job" 2>/dev/null | grep -q .; do sleep 0.2; done
slurm_s=$(awk -v a="$start" -v b="$(now)" 'BEGIN { print b - a }')
slurm_n=$(runs_done "$tmp/slurm")
slurm_last=$(last_end "$tmp/slurm" "$start")

echo "sweep-throughput: $(basename "$script")${ALPHAST_QUICK:+ (ALPHAST_QUICK=1)} on $cores cores, $cores runs at a time"
echo "  local executor: $(rate "$local_n" "$local_s")"
echo "  Slurm executor${TASKS:+, $TASKS tasks}: $(rate "$slurm_n" "$slurm_s") (submission to the last task's end; the last run ended at $(printf %.1f "$slurm_last") s)"
