#!/bin/sh
# The round trip .h5ad -> train -> sample -> anndata keeps obs_names and the
# obs columns (issue 12 item 3), checked with the real anndata library
# (tests/anndata_roundtrip.py) on the bundled Visium data (2-D, spot barcodes,
# categorical and integer obs columns), and obs columns that need other names
# in the written file ('a/b', cell). Skips (77) without Debian's
# python3-anndata for /usr/bin/python3.
set -eu
python=/usr/bin/python3
"$python" -c 'import anndata' 2>/dev/null || { echo "skipped: $python cannot import anndata (apt-get install python3-anndata)"; exit 77; }
src=$(cd "$(dirname "$0")/.." && pwd)
run="${ALPHAST_BUILD_DIR:-$src/_build}/alphast-run"
data="$src/data/visium_prostate/visium_prostate.h5ad"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/alphast-roundtrip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/tiny.yaml" <<YAML
training_mode: expr_to_pos
data:
  path: $data
  set_size: 24
  slice_key: sample
  cache_dir: null
  preprocessing: {position_key: spatial, cell_type_key: null}
diffusion: {diffusion_steps: 50}
training: {batch_size: 2, epochs: 1, steps_per_epoch: 2, val_sets: 2, val_t_points: 1, early_stopping: false}
mlp_in_expression_setting: {mlp_in_expression_dims: 8, mlp_out_expression_dims: 8}
mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 4, mlp_out_diffusion_time_dims: 4}
PositionMLP_setting: {hidden_dims: 4}
TransformerLayer_setting: {num_layers: 1, num_heads: 2, dim_ff_expression: 8, dim_ff_diffusion_time: 4}
mlp_out_expression_setting: {hidden_dims: 8}
mlp_out_position_norm_setting: {hidden_dims: 4}
monitors: [{name: grad_norm, every: 1}]
sampling: {num_steps: 2}
evaluation: {sets: 1}
YAML

"$run" train -q --config "$tmp/tiny.yaml" --out "$tmp/run" >"$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; exit 1; }
"$run" sample "$tmp/run" --out "$tmp/gen.h5ad"
# 2-D data, 2-D positions in the CSV too
"$run" sample "$tmp/run" --out - 2>/dev/null | head -1 >"$tmp/header"
[ "$(cat "$tmp/header")" = "cell,set,x,y,x_true,y_true" ] || { echo "CSV header: $(cat "$tmp/header")"; exit 1; }
"$python" "$src/tests/anndata_roundtrip.py" "$data" "$tmp/gen.h5ad" "$tmp/run"

# obs columns that cannot be written under their own names: 'a/b' (a path
# in HDF5), '_index' (the index's dataset; anndata 0.7 listed the index in
# column-order) and cell / alphast_cell (taken from the columns alphast adds)
# are written under free names, not lost to "writing failed (disk full?)".
"$python" - "$data" "$tmp/names.h5ad" <<'PY'
import sys, warnings
import anndata, h5py, numpy as np
warnings.simplefilter("ignore")
a = anndata.read_h5ad(sys.argv[1])
a.obs["a/b"] = np.arange(a.n_obs, dtype=float)
a.obs["cell"] = 1.0
a.obs["alphast_cell"] = 2.0
a.write_h5ad(sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    f["obs"].attrs["column-order"] = list(f["obs"].attrs["column-order"]) + ["_index"]
PY
"$run" train -q --config "$tmp/tiny.yaml" --out "$tmp/names" data.path="$tmp/names.h5ad" >"$tmp/train.log" 2>&1 ||
  { cat "$tmp/train.log"; exit 1; }
"$run" sample "$tmp/names" --out "$tmp/names_gen.h5ad" 2>"$tmp/sample.log" || { cat "$tmp/sample.log"; exit 1; }
grep -q "obs column 'a/b' is written as 'a_b' ('/' separates HDF5 groups)" "$tmp/sample.log" || { cat "$tmp/sample.log"; exit 1; }
"$python" - "$tmp/names.h5ad" "$tmp/names_gen.h5ad" <<'PY'
import sys, warnings
import anndata, numpy as np
warnings.simplefilter("ignore")
src, gen = anndata.read_h5ad(sys.argv[1]), anndata.read_h5ad(sys.argv[2])
want = ["sample", "array_row", "array_col", "a_b", "cell", "alphast_cell", "_index_2", "alphast_cell_2", "set"]
assert list(gen.obs.columns) == want, list(gen.obs.columns)
np.testing.assert_array_equal(gen.obs["a_b"].to_numpy(), src.obs.loc[gen.obs_names, "a/b"].to_numpy())
np.testing.assert_array_equal(gen.obs["alphast_cell_2"].to_numpy(), src.obs_names.get_indexer(gen.obs_names))
assert list(gen.obs["_index_2"].astype(str)) == list(gen.obs_names)
PY
