#!/usr/bin/env bash
# A throwaway one-node Slurm cluster (munged + slurmctld + slurmd) in a
# private directory, for tests/test_slurm.sh and for trying
# `alphast-run sweep --executor slurm` on one machine (docs/cluster.md):
#
#   scripts/slurm-local.sh start DIR   # start it; prints the SLURM_CONF line to export
#   scripts/slurm-local.sh stop DIR    # stop exactly the daemons `start` started
#
# Everything lives in DIR: slurm.conf, the munge key, socket and state, the
# controller's state, the node's spool, logs and the daemons' PIDs. Nothing
# outside it is read or written (no /etc/slurm, /run/munge or systemd), the
# ports are free ones, and the node is this machine as `slurmd -C` sees it.
# Needs root (slurmd runs jobs as their users) and Debian's slurm-wlm and
# munge; without them `start` exits 77, the status automake reads as SKIP.
# SLURM_PLUGIN_DIR sets slurm.conf's PluginDir, for a Slurm unpacked away
# from /usr (scripts/device-bench.sh bundle --cluster).
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1 dir=$2

skip() { echo "slurm-local: $*" >&2; exit 77; }
fail() { echo "slurm-local: $*" >&2; exit 1; }

# Kills the daemon whose PID file `start` wrote, if that PID still runs
# the daemon it started (a PID can be reused once it exits).
stop_one() {
  local name=$1 file="$dir/pids/$1" pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

stop() {
  stop_one slurmd
  stop_one slurmctld
  stop_one munged
}

# A TCP port nothing listens on, from a random start.
free_port() {
  local port
  for _ in $(seq 200); do
    port=$((20000 + RANDOM % 40000))
    if ! ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then echo "$port"; return; fi
  done
  fail "no free TCP port found"
}

# Runs a daemon in the foreground, in the background, and records its PID.
launch() {
  local name=$1; shift
  "$@" >"$dir/log/$name.out" 2>&1 </dev/null &
  echo $! >"$dir/pids/$name"
}

# Waits until `what` succeeds while daemon `name` runs, or fails showing its log.
wait_for() {
  local name=$1 what=$2 log=$3 why="timed out waiting for: $2"
  for _ in $(seq 150); do
    if eval "$what" >/dev/null 2>&1; then return 0; fi
    kill -0 "$(cat "$dir/pids/$name")" 2>/dev/null || { why="$name exited"; break; }
    sleep 0.2
  done
  echo "slurm-local: $why; the end of $log:" >&2
  tail -n 20 "$log" >&2 || true
  stop
  exit 1
}

start() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to start slurmd (it runs jobs as their users)"
  local tool
  for tool in munged mungekey slurmctld slurmd sbatch scontrol sinfo ss; do
    command -v "$tool" >/dev/null || skip "$tool not found (apt-get install slurm-wlm munge iproute2)"
  done
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  # munged refuses a socket below a directory others cannot search.
  local up=$dir
  while up=$(dirname "$up"); [ "$up" != / ]; do
    [ -n "$(find "$up" -maxdepth 0 -perm -o+x)" ] ||
      fail "munged needs every directory above its socket searchable by all, and $up is not: chmod o+x $up, or choose a DIR elsewhere"
  done
  mkdir -p "$dir/munge" "$dir/munge-key" "$dir/state" "$dir/spool" "$dir/log" "$dir/pids"
  # munged wants its socket's directory searchable by all and its key private.
  chmod 755 "$dir" "$dir/munge"
  chmod 700 "$dir/munge-key"
  local host node conf="$dir/slurm.conf"
  host=$(hostname -s)
  # The node as slurmd measures it, less the uptime: a node configured
  # with other CPUs or memory would be drained as invalid.
  node=$(slurmd -C | head -n 1)
  [ "${node#NodeName=}" != "$node" ] || fail "slurmd -C printed no NodeName line: $node"
  mungekey --create --keyfile="$dir/munge-key/munge.key" --force >/dev/null 2>&1 ||
    fail "mungekey could not create $dir/munge-key/munge.key"
  cat >"$conf" <<EOF
# Written by scripts/slurm-local.sh: a one-node cluster in $dir.
ClusterName=alphast-local
SlurmctldHost=$host
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# No cgroups, accounting database or systemd: processes are tracked by
# their parents, tasks are not bound, nothing is accounted.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
${SLURM_PLUGIN_DIR:+PluginDir=$SLURM_PLUGIN_DIR}
$node
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  launch munged munged -F --socket="$dir/munge/munge.socket" --key-file="$dir/munge-key/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge-key/munged.seed"
  wait_for munged "[ -S '$dir/munge/munge.socket' ]" "$dir/log/munged.out"
  export SLURM_CONF=$conf
  launch slurmctld slurmctld -D -i -f "$conf"
  wait_for slurmctld "scontrol ping | grep -q UP" "$dir/log/slurmctld.log"
  launch slurmd slurmd -D -f "$conf"
  wait_for slurmd "sinfo -h -n '$host' -o %T | grep -qx idle" "$dir/log/slurmd.log"
  echo "export SLURM_CONF=$conf"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
