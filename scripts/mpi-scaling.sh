#!/usr/bin/env bash
# How one training run scales over MPI ranks (docs/cluster.md, "One run over
# MPI"; on GPUs docs/gpu.md, "Several GPUs"): the same run at R ranks, for
# each R of RANKS, against one process without mpirun. Prints the time of a
# training step, the sets trained per second and the speed-up over the one
# process.
#
#   scripts/mpi-scaling.sh [KEY=VALUE ...]
#
# On the CPU (DEVICE=cpu, the default) each rank has CORES/R threads and the
# one process CORES. With DEVICE=cuda each rank trains on its own GPU (the
# GPU of its local rank) with CORES/R host threads; RANKS defaults to the
# powers of 2 up to the GPUs nvidia-smi lists.
# SHAPE picks the run:
#   visium     the Visium config at about the reference config's model size
#              (6 layers, width 256, 8 heads, feed-forward 1024; batches of
#              16 sets of 256 spots); the default
#   reference  the reference size of bench_model: 2,000 genes, batches of 32
#              sets of 512 cells, on a synthetic table of 4,096 cells
#   cells      the gated model at that size with 200 genes, one set of
#              32,768 cells per rank at the most ranks (batches of the
#              largest R of RANKS sets), on a synthetic table of 36,864 cells
# The synthetic tables (x, y and Poisson-like counts that vary smoothly over
# space; written once into OUT by awk) stand in for data of that size: the
# bundled sets have 1,255 genes at most and 5,328 cells at most.
# Each run trains STEPS steps; KEY=VALUE overrides change it.
# Environment: DEVICE, SHAPE, CORES (default: all of this machine's), RANKS
# (default "1 2 4 8", those of them up to CORES, or up to the GPUs), STEPS
# (default 30; the first 5 are warm-up and not timed), ALPHAST_RUN (default
# _build/alphast-run, a build configured --with-mpi, and --with-cuda for
# DEVICE=cuda), MPIRUN (default mpirun), OUT (the run directories, default a
# temporary one, removed at the end), BIND (default cores: each rank is bound
# to its CORES/R cores; "none" leaves placement to the kernel).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in -h | --help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
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

device=${DEVICE:-cpu}
shape=${SHAPE:-visium}
max_ranks=$cores gpus=
if [ "$device" != cpu ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  ((gpus > 0)) || { echo "mpi-scaling: DEVICE=$device but nvidia-smi lists no GPU" >&2; exit 1; }
  max_ranks=$gpus
fi
ranks_list=${RANKS:-1 2 4 8}
most=1
for r in $ranks_list; do ((r <= max_ranks && r > most)) && most=$r; done

# synthetic N G FILE: a table of N cells x G genes with x and y in [0, 100);
# gene g's count is the integer part of a rate that follows a wave over
# space (its own direction and phase) times a uniform draw, so nearby cells
# have alike expression, as in tissue.
synthetic() {
  [ -s "$3" ] && return 0
  awk -v n="$1" -v g="$2" 'BEGIN {
    srand(7); OFS = ","; h = "x,y"; for (j = 0; j < g; j++) h = h ",g" j; print h
    for (j = 0; j < g; j++) { a[j] = 6.2832 * rand(); f[j] = 0.02 + 0.1 * rand(); p[j] = 6.2832 * rand() }
    for (i = 0; i < n; i++) {
      x = 100 * rand(); y = 100 * rand(); line = sprintf("%.3f,%.3f", x, y)
      for (j = 0; j < g; j++) {
        rate = 4 * (1 + sin(f[j] * (x * cos(a[j]) + y * sin(a[j])) + p[j]))
        line = line "," int(rate * rand())
      }
      print line
    } }' >"$3.tmp" && mv "$3.tmp" "$3"
}

# The reference config's model (bench/bench_cases.c's reference_size).
reference_model=(
  mlp_in_expression_setting.mlp_in_expression_dims=128 mlp_in_expression_setting.mlp_out_expression_dims=256
  mlp_in_diffusion_time_setting.mlp_in_diffusion_time_dims=64 mlp_in_diffusion_time_setting.mlp_out_diffusion_time_dims=64
  PositionMLP_setting.hidden_dims=64
  TransformerLayer_setting.num_layers=6 TransformerLayer_setting.num_heads=8
  TransformerLayer_setting.dim_ff_expression=1024 TransformerLayer_setting.dim_ff_diffusion_time=256
)
# A synthetic table: no sections to cut, no structural prior, no dropout.
synthetic_data=(data.slice_key=null model.prior=none data.loading.expression_dropout=0
  data.split_ratio.train=0.9 data.split_ratio.val=0.1)
case $shape in
  visium) shape_args=(data.set_size=256 training.batch_size=16 "${reference_model[@]}"
            mlp_out_expression_setting.hidden_dims=256 mlp_out_position_norm_setting.hidden_dims=64) ;;
  reference)
    synthetic 4096 2000 "$out/synthetic-4096x2000.csv"
    shape_args=("data.path=$out/synthetic-4096x2000.csv" "${synthetic_data[@]}" data.set_size=512
      training.batch_size=32 "${reference_model[@]}" mlp_out_expression_setting.hidden_dims=512
      mlp_out_position_norm_setting.hidden_dims=128) ;;
  cells)
    synthetic 36864 200 "$out/synthetic-36864x200.csv"
    shape_args=("data.path=$out/synthetic-36864x200.csv" "${synthetic_data[@]}" data.set_size=32768
      "training.batch_size=$most" "${reference_model[@]}" mlp_out_expression_setting.hidden_dims=512
      mlp_out_position_norm_setting.hidden_dims=128 attention=gated) ;;
  *) echo "mpi-scaling: SHAPE must be visium, reference or cells, not '$shape'" >&2; exit 2 ;;
esac

overrides=(
  "device=$device" "${shape_args[@]}"
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
for r in $ranks_list; do
  ((r <= max_ranks && r <= cores)) || continue
  t=$((cores / r))
  ms=$(train "mpi-$r" "$r" "$t") && report "mpirun -np $r" "$r" "$t" "$ms"
done
kept=" (removed now)"
[ -n "${OUT:-}" ] && kept=
echo "mpi-scaling: $steps steps per run ($warmup untimed) on $cores cores${gpus:+ and $gpus GPUs} ($device, $shape), batches of $batch sets; runs and logs in $out$kept"
