#!/usr/bin/env bash
# Sweeps on a real Slurm (docs/cluster.md): a one-node cluster of munged,
# slurmctld and slurmd started here (scripts/slurm-local.sh, stopped by PID
# on exit, failed or not) runs
#   1. a tiny sweep whose script asks for Slurm, and the quick ablation
#      through `--executor slurm`, each to the report the local executor
#      writes (timings aside) and the same losses;
#   2. a sweep preempted mid-run: task 0 gets Slurm's warning (SIGUSR1 to the
#      batch step), checkpoints and requeues itself; task 1 gets SIGTERM in
#      every process, as preemption does, and leaves its run pending; the
#      requeued task finishes both. Every run ends done exactly once with
#      the losses of an uninterrupted run, and --status says so on the way.
# Skips (77) where the daemons cannot start (not root, no slurm-wlm/munge).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
run="${ALPHAST_BUILD_DIR:-$src/_build}/alphast-run"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/alphast-slurm.XXXXXX")
cluster="$tmp/cluster"
cleanup() {
  bash "$src/scripts/slurm-local.sh" stop "$cluster" || true
  rm -rf "$tmp"
}
trap cleanup EXIT
chmod 755 "$tmp" # munged wants the directories above its socket searchable by all
unset SLURM_JOB_ID SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID # in case this runs inside a job

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }

rc=0
env_line=$(bash "$src/scripts/slurm-local.sh" start "$cluster") || rc=$?
[ "$rc" -eq 77 ] && { echo "skipped: the one-node Slurm cluster cannot start here"; exit 77; }
[ "$rc" -eq 0 ] || fail "scripts/slurm-local.sh start failed ($rc)"
eval "$env_line" # export SLURM_CONF=...

# The job array id that `sweep --executor slurm` printed.
job_of() { sed -n 's/.*submitted Slurm job array \([0-9]*\).*/\1/p' <<<"$1"; }

# Waits until Slurm has no task of job $1 left, for at most $2 seconds.
wait_job() {
  local i
  for i in $(seq $(($2 * 5))); do
    squeue -h -j "$1" 2>/dev/null | grep -q . || return 0
    sleep 0.2
  done
  squeue -j "$1" >&2 || true
  fail "job $1 still in the queue after $2 s"
}

# The train and epoch lines of a run's metrics.jsonl without their times.
losses() { grep -E '"kind":"(train|epoch)"' "$1/metrics.jsonl" | sed 's/"time":[0-9.]*,//'; }

# report.md without what depends on timing: the Cost table, step-time
# ratios, and the sweep directory's name.
untimed_report() {
  sed -e '/^## Cost/,/^## /{/^## Training/!d}' -e '/step time/d' \
      -e 's/^Sweep directory [^:]*:/Sweep directory:/' -e 's/^# Ablation report: .*/# Ablation report/' "$1"
}

# The runs of a sweep directory must each be done exactly once.
done_once() {
  local dir=$1 r n
  for r in "$dir"/runs/*/; do
    r=$(basename "$r")
    n=$(grep -c "\"run\":\"$r\".*\"state\":\"done\"" "$dir/ledger.jsonl" || true)
    [ "$n" -eq 1 ] || fail "$r recorded done $n times in $dir/ledger.jsonl"
  done
}

# Runs sweep script $2 into $1/local with the local executor and into
# $1/slurm with the Slurm one ($3...: how to ask for it), then checks that
# every run is done once on Slurm, with the same losses and report.
both_executors() {
  local dir=$1 script=$2 start out job local_s slurm_s r
  shift 2
  start=$(date +%s)
  "$run" sweep --executor local --out "$dir/local" "$script" >"$dir.local.log" 2>&1 ||
    { cat "$dir.local.log"; fail "the local sweep of $script failed"; }
  local_s=$(($(date +%s) - start))
  start=$(date +%s)
  out=$("$run" sweep "$@" --out "$dir/slurm" "$script")
  echo "$out"
  job=$(job_of "$out")
  [ -n "$job" ] || fail "no job id in: $out"
  wait_job "$job" 600
  slurm_s=$(($(date +%s) - start))
  "$run" sweep --status "$dir/slurm" | tee "$tmp/status"
  grep -q ': \([0-9]*\) runs: \1 done, 0 running, 0 pending, 0 failed' "$tmp/status" || fail "not all done"
  done_once "$dir/slurm"
  [ -f "$dir/slurm/report.md" ] || fail "the last task wrote no report"
  diff <(untimed_report "$dir/local/report.md") <(untimed_report "$dir/slurm/report.md") ||
    fail "the Slurm executor's report differs from the local one's"
  for r in "$dir"/local/runs/*/; do
    diff <(losses "$r") <(losses "$dir/slurm/runs/$(basename "$r")") >/dev/null ||
      fail "$(basename "$r"): losses differ between the executors"
  done
  echo "$(basename "$script"): local executor ${local_s} s, Slurm executor ${slurm_s} s (this machine, $(nproc) cores)"
}

step "1. a sweep whose script asks for Slurm (partition, time, mem, sbatch options), and --executor local"
both_executors "$tmp/tiny" "$src/tests/data/sweeps/slurm.lua"
grep -q '^#SBATCH --comment=from-the-script$' "$tmp/tiny/slurm/slurm/sweep.sbatch" || fail "the script's sbatch options"

# The quick ablation's 15 runs of real data take minutes under sanitizers
# and could meet its time limit (training.max_minutes) there.
if ldd "$run" 2>/dev/null | grep -qE 'lib(a|ub)san'; then
  step "1b. the quick ablation: skipped in a sanitizer build"
else
  step "1b. the quick ablation, --executor slurm against the local executor"
  ALPHAST_QUICK=1 both_executors "$tmp/quick" "$src/scripts/ablation.lua" --executor slurm
  grep -q '^#SBATCH --array=0-14$' "$tmp/quick/slurm/slurm/sweep.sbatch" || fail "not 15 tasks"
fi

step "2. preemption: a warned task requeues itself, a terminated one leaves its run pending"
script="$src/tests/data/sweeps/slurm_preempt.lua"
"$run" sweep --jobs 2 --out "$tmp/ref" "$script" >"$tmp/ref.log" 2>&1 || { cat "$tmp/ref.log"; fail "reference sweep"; }
pre="$tmp/preempt"
out=$("$run" sweep --executor slurm --tasks 2 --out "$pre" "$script")
job=$(job_of "$out")
# Both runs under way, far from their 1,500 steps.
for i in $(seq 300); do
  n=$(cat "$pre"/runs/*/metrics.jsonl 2>/dev/null | grep -c '"kind":"train"' || true)
  files=$( (ls "$pre"/runs/*/metrics.jsonl 2>/dev/null || true) | wc -l)
  [ "$files" -eq 2 ] && [ "$n" -ge 100 ] && break
  sleep 0.1
done
[ "$files" -eq 2 ] && [ "$n" -ge 100 ] || fail "the two runs did not start"
"$run" sweep --status "$pre" | tee "$tmp/status"
grep -q 'running .* on .*, pid [0-9]*, Slurm job '"$job"'_[01], for' "$tmp/status" || fail "no running run with its task"
scancel --signal=USR1 --batch "${job}_0"        # the warning before a time limit, to the batch step
scancel --signal=TERM --full "${job}_1"         # preemption: every process of the task
preempted_and_requeued() {
  [ "$(grep -c '"reason":"preempted"' "$pre/ledger.jsonl" || true)" -ge 2 ] &&
    [ "$(squeue -h -j "${job}_0" -o %T 2>/dev/null)" = PENDING ]
}
for i in $(seq 300); do
  preempted_and_requeued && break
  sleep 0.2
done
preempted_and_requeued || { squeue -j "$job" >&2 || true; fail "after 60 s: not both runs preempted with task 0 pending again"; }
"$run" sweep --status "$pre" | tee "$tmp/status"
[ "$(grep -c 'pending .* preempted: resumes from its checkpoint' "$tmp/status")" -eq 2 ] || fail "runs not pending as preempted"
grep -q "requeueing Slurm job" "$pre/slurm/${job}_0.out" || fail "task 0 did not requeue itself"
grep -q "requeueing Slurm job" "$pre/slurm/${job}_1.out" && fail "task 1 (SIGTERM) requeued itself"
# Slurm holds a requeued job back for a while (its begin time); start it now.
scontrol update JobId="${job}_0" StartTime=now
wait_job "$job" 180
"$run" sweep --status "$pre" | tee "$tmp/status"
grep -q ': 2 runs: 2 done, 0 running, 0 pending, 0 failed' "$tmp/status" || fail "not all done after the requeue"
done_once "$pre"
for r in "$tmp"/ref/runs/*/; do
  name=$(basename "$r")
  grep -q '"state":"pending".*"reason":"preempted"' <(grep "\"run\":\"$name\"" "$pre/ledger.jsonl") ||
    fail "$name was never preempted"
  grep -q "alphast: resuming" "$pre/runs/$name/train.log" || fail "$name did not resume from its checkpoint"
  diff <(losses "$r") <(losses "$pre/runs/$name") >/dev/null || fail "$name: losses differ from the uninterrupted run's"
done
echo "both runs preempted mid-run and done once, with the uninterrupted losses"
