#!/bin/sh
# `alphast-run predict` (issue 24): a tiny run trained on a generated 2-D
# dataset places new cells given as .h5ad and as CSV (shuffled, genes
# permuted, one extra gene, no coordinates), keeping their names, order and
# obs; a missing gene is an error naming it, zeros with
# --allow-missing-genes; sections larger than a set are stitched; and the
# run's own test cells are placed as `sample` places them (checked with the
# real anndata, tests/predict_check.py). A tiny pos_to_expr run generates
# expression at positions given alone (.h5ad without X, CSV of x and y) as
# `sample` generates it for its test cells, and a missing position key is
# one error line. Skips (77) without Debian's
# python3-anndata for /usr/bin/python3.
set -eu
python=/usr/bin/python3
"$python" -c 'import anndata' 2>/dev/null || { echo "skipped: $python cannot import anndata (apt-get install python3-anndata)"; exit 77; }
src=$(cd "$(dirname "$0")/.." && pwd)
run="${ALPHAST_BUILD_DIR:-$src/_build}/alphast-run"
check="$src/tests/predict_check.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/alphast-predict.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$python" "$check" make "$tmp"

# Whole-slice sets: the test split is one set, which predict makes too.
# Unscaled: the z-score of a few cells differs from their section's.
cat >"$tmp/tiny.yaml" <<YAML
training_mode: expr_to_pos
data:
  path: $tmp/tiny.h5ad
  set_size: 0
  cache_dir: null
  preprocessing: {position_key: spatial, cell_type_key: null, scale: false}
diffusion: {diffusion_steps: 20}
training: {batch_size: 1, epochs: 1, steps_per_epoch: 2, val_sets: 1, val_t_points: 1, early_stopping: false}
mlp_in_expression_setting: {mlp_in_expression_dims: 8, mlp_out_expression_dims: 8}
mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 4, mlp_out_diffusion_time_dims: 4}
PositionMLP_setting: {hidden_dims: 4}
TransformerLayer_setting: {num_layers: 1, num_heads: 2, dim_ff_expression: 8, dim_ff_diffusion_time: 4}
mlp_out_expression_setting: {hidden_dims: 8}
mlp_out_position_norm_setting: {hidden_dims: 4}
sampling: {num_steps: 3}
evaluation: {sets: 1, k_neighbors: 3}
YAML
"$run" train -q --config "$tmp/tiny.yaml" --out "$tmp/run" >"$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; exit 1; }

# 50 cells in sets of 16, 4 of them landmarks: several sets, stitched
"$run" predict "$tmp/run" --data "$tmp/new.h5ad" --out "$tmp/out.h5ad" evaluation.max_set_size=16 2>"$tmp/err"
if grep -q 'not aligned' "$tmp/err"; then cat "$tmp/err"; exit 1; fi
"$run" predict "$tmp/run" --data "$tmp/new.csv" --out "$tmp/out.csv" evaluation.max_set_size=16
"$run" predict "$tmp/run" --data "$tmp/bad_var.h5ad" --out "$tmp/bad_var_out.h5ad" evaluation.max_set_size=16 2>"$tmp/err"
grep -q 'var columns are left out' "$tmp/err" || { echo "no warning about the damaged var column:"; cat "$tmp/err"; exit 1; }

# a missing gene: one error line naming it, or zeros when allowed
if "$run" predict "$tmp/run" --data "$tmp/lacking.h5ad" --out "$tmp/x.h5ad" 2>"$tmp/err"; then
    echo "predict accepted data without gene g3"; exit 1
fi
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^alphast-run: .*lacking.h5ad: 1 of the run.s 6 genes are missing (g3); .*--allow-missing-genes' "$tmp/err" ||
    { echo "missing-gene error:"; cat "$tmp/err"; exit 1; }
[ ! -e "$tmp/x.h5ad" ] || { echo "an output was written after the error"; exit 1; }
"$run" predict "$tmp/run" --data "$tmp/lacking.h5ad" --out "$tmp/lacking_out.h5ad" --allow-missing-genes 2>"$tmp/err"
grep -q 'missing and taken as zeros (g3)' "$tmp/err" || { cat "$tmp/err"; exit 1; }

# the run's own test cells, in the order sample holds them
"$run" sample "$tmp/run" --out "$tmp/sample.h5ad" >/dev/null
"$python" "$check" cells "$tmp"
"$run" predict "$tmp/run" --data "$tmp/cells.h5ad" --out "$tmp/own.h5ad" >/dev/null

"$python" "$check" check "$tmp"

# pos_to_expr: the expression at the run's own test cells' positions
sed 's/^training_mode: expr_to_pos/training_mode: pos_to_expr/' "$tmp/tiny.yaml" >"$tmp/p2e.yaml"
"$run" train -q --config "$tmp/p2e.yaml" --out "$tmp/p2e" >"$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; exit 1; }
"$run" sample "$tmp/p2e" --out "$tmp/p2e_sample.h5ad" >/dev/null
"$python" "$check" positions "$tmp"
"$run" predict "$tmp/p2e" --data "$tmp/positions.h5ad" --out "$tmp/p2e_out.h5ad" >/dev/null
"$run" predict "$tmp/p2e" --data "$tmp/positions.csv" --out "$tmp/p2e_out.csv" >/dev/null
"$run" predict "$tmp/p2e" --data "$tmp/positions.h5ad" --out "$tmp/p2e_sets.h5ad" evaluation.max_set_size=3 >/dev/null
if "$run" predict "$tmp/p2e" --data "$tmp/positions.h5ad" --position-key xy --out "$tmp/y.h5ad" 2>"$tmp/err"; then
    echo "predict accepted data without obsm/xy"; exit 1
fi
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^alphast-run: .*positions.h5ad: no coordinates at obsm/xy .*--position-key' "$tmp/err" ||
    { echo "missing-position error:"; cat "$tmp/err"; exit 1; }
if "$run" predict "$tmp/run" --task pos_to_expr --data "$tmp/positions.h5ad" --out "$tmp/y.h5ad" 2>"$tmp/err"; then
    echo "an expr_to_pos run generated expression"; exit 1
fi
grep -q 'trained for expr_to_pos and cannot generate expression' "$tmp/err" || { cat "$tmp/err"; exit 1; }
"$python" "$check" check_expr "$tmp"
