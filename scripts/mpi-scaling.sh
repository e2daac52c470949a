#!/usr/bin/env bash
# How one training run scales over MPI ranks (docs/cluster.md, "One run over
# MPI"): the same run at R ranks of CORES/R threads each, for each R of
# RANKS, against one process of CORES threads without mpirun. Prints the
# time of a training step, the sets trained per second and the speed-up
# over the one process.
#
#   scripts/mpi-scaling.sh [KEY=VALUE ...]
#
# The run is the Visium config at about the reference config's model size
# (6 layers, width 256, 8 heads, feed-forward 1024; batches of 16 sets of
# 256 spots), trained for STEPS steps; KEY=VALUE overrides change it.
# Environment: CORES (default: all of this machine's), RANKS (default
# "1 2 4 8", those of them up to CORES), STEPS (default 30; the first 5
# are warm-up and not timed), ALPHAST_RUN (default _build/alphast-run, a
# build configured --with-mpi), MPIRUN (default mpirun), OUT (the run
# directories, default a temporary one, removed at the end), BIND (default
# cores: each rank is bound to its CORES/R cores; "none" leaves placement
# to the kernel).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
run=${ALPHAST_RUN:-$top/_build/alphast-run}
mpirun=${MPIRUN:-mpirun}
cores=${CORES:-$(nproc)}
steps=${STEPS:-30}
warmup=5
[ -x "$run" ] || { echo "mpi-scaling: no $run; build alphast (scripts/build.sh) or set ALPHAST_RUN" >&2; exit 1; }
command -v "$mpirun" >/dev/null || { echo "mpi-scaling: no $mpirun; apt-get install openmpi-bin" >&2; exit 1; }
((steps > warmup + 1)) || { echo "mpi-scaling: STEPS must be above $((warmup + 1))" >&2; exit 2; }
out=${OUT:-}
if [ -z "$out" ]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/alphast-mpi-scaling.XXXXXX")
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

overrides=(
  data.set_size=256 training.batch_size=16
  mlp_in_expression_setting.mlp_in_expression_dims=128 mlp_in_expression_setting.mlp_out_expression_dims=256
  mlp_in_diffusion_time_setting.mlp_in_diffusion_time_dims=64 mlp_in_diffusion_time_setting.mlp_out_diffusion_time_dims=64
  PositionMLP_setting.hidden_dims=64
  TransformerLayer_setting.num_layers=6 TransformerLayer_setting.num_heads=8
  TransformerLayer_setting.dim_ff_expression=1024 TransformerLayer_setting.dim_ff_diffusion_time=256
  mlp_out_expression_setting.hidden_dims=256 mlp_out_position_norm_setting.hidden_dims=64
  # one epoch of the timed steps; a token validation, no evaluation
  training.epochs=1 "training.steps_per_epoch=$steps" training.max_minutes=0 training.early_stopping=false
  training.val_sets=8 training.val_t_points=1 data.split_ratio.test=0
  "$@"
)

# The median time between consecutive steps after the warm-up, in ms, from
# the wall-clock times of metrics.jsonl's train lines.
step_ms() { # run-dir
  sed -n 's/.*"kind":"train","time":\([0-9.]*\),.*/\1/p' "$1/metrics.jsonl" |
    awk -v w="$warmup" 'NR > w + 1 { print ($1 - prev) * 1000 } { prev = $1 }' | sort -n |
    awk '{ d[++n] = $1 } END { if (!n) exit 1; print (n % 2) ? d[(n + 1) / 2] : (d[n / 2] + d[n / 2 + 1]) / 2 }'
}

mpi_args=()
[ "$(id -u)" = 0 ] && mpi_args+=(--allow-run-as-root)
((cores > $(nproc))) && mpi_args+=(--oversubscribe)

train() { # name ranks threads: one run, its step time on stdout
  local name=$1 ranks=$2 threads=$3 launch=()
  if ((ranks > 0)); then
    launch=("$mpirun" -np "$ranks" "${mpi_args[@]}" -x "OPENBLAS_NUM_THREADS=$threads")
    if [ "${BIND:-cores}" = none ]; then
      launch+=(--bind-to none)
    else
      launch+=(--map-by "slot:PE=$threads" --bind-to core)
    fi
  fi
  OPENBLAS_NUM_THREADS=$threads "${launch[@]}" "$run" train -q --fresh --config "$top/configs/visium.yaml" \
    --out "$out/$name" "${overrides[@]}" >"$out/$name.log" 2>&1 || { tail -n 5 "$out/$name.log" >&2; return 1; }
  step_ms "$out/$name"
}

batch=16
for o in "${overrides[@]}"; do case $o in training.batch_size=*) batch=${o#*=} ;; esac; done
printf '%-24s %6s %8s %9s %8s %9s\n' run ranks threads "step ms" "sets/s" speed-up
base=
report() { # name ranks threads ms: one line, the speed-up over the first run
  [ -n "$base" ] || base=$4
  awk -v n="$1" -v r="$2" -v t="$3" -v ms="$4" -v b="$base" -v B="$batch" \
    'BEGIN { printf "%-24s %6d %8d %9.1f %8.1f %8.2fx\n", n, r, t, ms, B * 1000 / ms, b / ms }'
}
ms=$(train one-process 0 "$cores") && report "one process, no mpirun" 1 "$cores" "$ms"
for r in ${RANKS:-1 2 4 8}; do
  ((r <= cores)) || continue
  t=$((cores / r))
  ms=$(train "mpi-$r" "$r" "$t") && report "mpirun -np $r" "$r" "$t" "$ms"
done
kept=" (removed now)"
[ -n "${OUT:-}" ] && kept=
echo "mpi-scaling: $steps steps per run ($warmup untimed) on $cores cores, batches of $batch sets; runs and logs in $out$kept"
