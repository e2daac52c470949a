# shellcheck shell=bash disable=SC2154 # $work, $run, $limit: hostile-inputs.sh's
# Round 3 of scripts/hostile-inputs.sh (sourced by it, with its $work, $run,
# check, train and counters): the reproducers of issue 25 in
# $work/round3, as its README.md runs them. Each folder runs in its own
# directory ($here), with its tiny.yaml pointed at the bundled data.

r3=$work/round3
split='data.split_ratio={train: 0.8, val: 0.2, test: 0}' # no held-out evaluation where it is not the subject

# A row that is not a run of its own: what the last check's run did wrong,
# or what could not run here.
wrong() { # KIND NAME WHY
  local why=${3//$work\//}
  why=${why//$'\n'/ }
  printf '| %s | `%s` | WRONG | | %s |\n' "$1" "$2" "${why//|/\\|}"
  bad=$((bad + 1)) rows=$((rows + 1))
}
skip() { # KIND NAME WHY
  printf '| %s | `%s` | skipped | | %s |\n' "$1" "$2" "$3"
  rows=$((rows + 1))
}
said() { grep -q -- "$1" "$work/err"; }

# A finished run without a test split, for sample, init_from and the cache.
here=$r3/init_from
(cd "$here" && $run train -q --config tiny.yaml --out "$here/good" training.epochs=1 "$split" >/dev/null 2>&1) ||
  { echo "hostile-inputs: the round-3 reference run failed" >&2; exit 2; }
good=$here/good

# lua/: the restricted sweep sandbox.
here=$r3/lua
mkfifo "$here/fifo.yaml"
for n in gc_finalizer_hang gc_finalizer_membomb config_fifo error_nil; do
  # the memory bomb grows by ~80 MB/s: a shorter leash
  t=$limit
  [ $n = gc_finalizer_membomb ] && t=$((limit < 15 ? limit : 15))
  limit=$t check lua3 "$n.lua" error -- sweep --dry-run -o "$here/out-$n" "$n.lua"
done
said 'error_nil.lua:' || wrong lua3 error_nil.lua "the message names no file:line: $(head -c 120 "$work/err")"

# slurm/: a restricted script's sbatch options. Running the batch script
# needs a Slurm cluster (scripts/slurm-local.sh); the refusal needs none.
here=$r3/slurm
check slurm "restricted_sbatch_escape.lua (--dry-run)" error -- \
  sweep --dry-run -o "$here/sx" restricted_sbatch_escape.lua
skip slurm "restricted_sbatch_escape.lua (submitted)" "needs a Slurm cluster: scripts/slurm-local.sh start DIR"

# schedule/: train --schedule FILE.safetensors.
here=$r3/schedule
python3 "$here/mk_schedule_tables.py" "$here" >/dev/null
# ok and lr_only are valid (lr_only may be too short for the run); nine_named is not
for t in ok:any lr_only:any nine_named:error; do
  n=${t%:*}
  check schedule "$n.safetensors" "${t#*:}" -- train -q --config tiny.yaml --out "$here/r-$n" --schedule "$n.safetensors" \
    training.epochs=1 "$split"
done

# h5ad/: anndata layouts, trained on and written back by sample --out x.h5ad
# (the 40-180 MB cases of mkh5_r3.py are left out: disk and time).
here=$r3/h5ad
h5train() { # NAME EXPECT [OVERRIDE...]
  local n=$1 expect=$2
  shift 2
  check h5ad3 "$n.h5ad" "$expect" -- train -q --config h5.yaml --data "$n.h5ad" --out "$here/runs/$n" data.cache_dir=null \
    "data.split_ratio={train: 0.7, val: 0.3, test: 0}" "$@"
}
for n in obs_col_slash obs_col_cell_clash obs_col_index_name nonutf8_obs_names; do
  h5train $n ok
  check h5ad3 "$n.h5ad (sample --out x.h5ad)" any -- sample "$here/runs/$n" --split val --out "$here/$n-out.h5ad"
  ! said 'disk full' || wrong h5ad3 "$n.h5ad (sample --out x.h5ad)" "blames the disk: $(head -c 120 "$work/err")"
done
h5train cat_dup_categories error data.slice_key=slice
h5train dup_var_names ok
h5train layers_mismatch error data.layer=counts
said 'layers/counts' || wrong h5ad3 layers_mismatch.h5ad "does not name layers/counts: $(head -c 120 "$work/err")"
h5train raw_cells_mismatch error data.use_raw=true
said 'raw/' || wrong h5ad3 raw_cells_mismatch.h5ad "does not name raw/: $(head -c 120 "$work/err")"

skip sample_diskfull "x.h5ad on a full disk" "needs a 1 MB tmpfs (mount -t tmpfs, root): sample_diskfull/ in round3/README.md"

# init_from/: damaged copies of the reference run's weights (each refused
# or harmless), and FIFOs where a file is read.
here=$r3/init_from
python3 "$here/mkinit.py" "$good/best.safetensors" "$here/init" >/dev/null
for f in "$here"/init/*.safetensors; do
  n=$(basename "$f")
  expect=any
  [ "$n" = no_genes_meta.safetensors ] && expect=error # no gene check at all
  check init_from "$n" "$expect" -- train -q --config tiny.yaml --out "$here/r-$n" training.epochs=1 "$split" "training.init_from=$f"
done
mkfifo "$here/fifo.safetensors" "$here/fifo.csv" "$here/fifo.h5ad"
check init_from "fifo.safetensors (training.init_from)" error -- \
  train -q --config tiny.yaml --out "$here/r-fifo" training.init_from=fifo.safetensors
check init_from "fifo.csv (--data)" error -- train -q --config tiny.yaml --out "$here/r-fcsv" --data fifo.csv
check init_from "fifo.h5ad (--data)" error ALPHAST_H5AD_TIMEOUT=10 -- train -q --config tiny.yaml --out "$here/r-fh5" --data fifo.h5ad

# cache/: a damaged cache file is rebuilt; a poisoned valid one must not be
# used as it is (its source did not change).
here=$r3/cache
(cd "$here" && $run train -q --config tiny.yaml --out "$here/r0" training.epochs=1 "$split" data.cache_dir=C >/dev/null 2>&1)
cached=$(ls "$here"/C/*.safetensors 2>/dev/null | head -1)
if [ -n "$cached" ]; then
  cp "$cached" "$here/pristine"
  for c in pos_nan indptr_bad indices_oob slice_oob codes_oob gene_sd_zero dims_huge truncated garbage values_scaled pos_shifted; do
    cp "$here/pristine" "$cached"
    python3 "$here/poison.py" $c "$cached"
    check cache "$c" ok -- train --config tiny.yaml --out "$here/r-$c" training.epochs=1 "$split" data.cache_dir=C
    case $c in values_scaled | pos_shifted)
      ! said 'using cached preprocessing' || wrong cache "$c" "trained on the poisoned cache" ;;
    esac
  done
else
  wrong cache "(reference run)" "data.cache_dir=C wrote no cache file"
fi

# atomic_write/: temporary files must not follow links planted at the
# names the next pids would give them.
here=$r3/atomic_write
echo precious >"$here/victim.txt"
(cd "$here" && python3 -c "import os; l = int(open('/proc/sys/kernel/ns_last_pid').read())
[os.symlink('victim.txt', 'x.csv.tmp.%d' % p) for p in range(l + 1, l + 3000)]")
check atomic_write "x.csv.tmp.PID links" any -- sample "$good" --split val --out x.csv
[ "$(cat "$here/victim.txt")" = precious ] || wrong atomic_write "x.csv.tmp.PID links" "wrote through a planted link into victim.txt"

# hydra/: the override grammar.
here=$r3/hydra
check hydra "nested sweep" error -- sweep --dry-run -o "$here/s1" -m --config tiny.yaml 'training.epochs=choice(1,range(2,4))'
check hydra "training.epochs=" error -- train --cfg --config tiny.yaml training.epochs=
! said 'mapping' || wrong hydra "training.epochs=" "calls an empty value a mapping"
deep="data.loading=$(printf '{a:%.0s' $(seq 100))1$(printf '}%.0s' $(seq 100))"
check hydra "100 nested {a:" error -- train --cfg --config tiny.yaml "$deep"
said '64' || wrong hydra "100 nested {a:" "does not name the nesting limit: $(head -c 120 "$work/err")"
mapfile -t many < <(seq -f 'training.epochs=%g' 65)
check hydra "65 overrides" error -- train --cfg --config tiny.yaml "${many[@]}"
said '64' || wrong hydra "65 overrides" "does not name the limit of 64: $(head -c 120 "$work/err")"
check hydra "seed=range(near 2^63)" any -- \
  sweep --dry-run -o "$here/s2" -m --config tiny.yaml 'seed=range(9223372036854775000,9223372036854775807)'
! grep -q 9223372036854774784 "$work/out" "$work/err" ||
  wrong hydra "seed=range(near 2^63)" "a value the user never wrote: 9223372036854774784"

# plugin/: plugins from directories others can write are refused or warned about.
here=$r3/plugin
dense=$(dirname "$run")/plugins/ffn/.libs/ffn_dense.so
if [ -f "$dense" ]; then
  mkdir -p "$here"/{g775,w666,relw,bd/plugins/ffn}
  chmod 775 "$here/g775"
  chmod 777 "$here/bd"
  for d in g775 w666 relw bd/plugins/ffn; do cp "$dense" "$here/$d/ffn_dense.so"; done
  chmod 666 "$here/w666/ffn_dense.so"
  check plugin "group-writable dir in ALPHAST_PLUGIN_PATH" warn ALPHAST_PLUGIN_PATH="$here/g775" -- plugins
  check plugin "world-writable plugin file" warn ALPHAST_PLUGIN_PATH="$here/w666" -- plugins
  check plugin "relative ALPHAST_PLUGIN_PATH" warn ALPHAST_PLUGIN_PATH=relw -- plugins
  check plugin "world-writable ALPHAST_BUILD_DIR" warn ALPHAST_BUILD_DIR="$here/bd" -- plugins
else
  skip plugin "(all)" "no $dense: build the plugins first"
fi

# mpi/: a signal to one rank after its training loop ended (here during the
# held-out evaluation, the longest part after it). Two ranks train and
# evaluate: three times the limit of one input.
here=$r3/mpi
if command -v mpirun >/dev/null; then
  ( cd "$here" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
    timeout -s KILL $((3 * limit)) mpirun --oversubscribe -np 2 --mca btl self,vader -x OPENBLAS_NUM_THREADS=1 "$run" train -q \
    --config tiny.yaml training.epochs=2 training.steps_per_epoch=20 training.batch_size=4 --out "$here/D" >"$work/err" 2>&1 )&
  launcher=$!
  for _ in $(seq $((30 * limit))); do [ -f "$here/D/summary.json" ] && break; sleep 0.1; done
  # the newest process started with this (unique) run directory: a rank
  rank=$(pgrep -n -f -- "--out $here/D") && kill -USR1 "$rank"
  wait $launcher
  rc=$?
  if said 'configure --with-mpi'; then
    skip mpi "SIGUSR1 to one rank after its loop" "needs a build configured --with-mpi"
  else
    rows=$((rows + 1))
    if ((rc == 0 || rc == 75)) && ! said 'exited on signal'; then outcome=ok
    elif ((rc == 137)); then outcome=HANG bad=$((bad + 1))
    else outcome=CRASH bad=$((bad + 1))
    fi
    printf '| mpi | `SIGUSR1 to one rank after its loop` | %s | | exit %d |\n' "$outcome" "$rc"
  fi
else
  skip mpi "SIGUSR1 to one rank after its loop" "needs mpirun (apt-get install openmpi-bin)"
fi
here=$work
