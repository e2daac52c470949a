"""Checks, with the real anndata, that `alphast-run sample --out x.h5ad`
joins back to the .h5ad it was trained on (tests/test_anndata_roundtrip.sh).

usage: anndata_roundtrip.py SOURCE.h5ad GENERATED.h5ad RUN_DIR
"""
import sys

import anndata
import numpy as np
import pandas as pd


def check_obs(src, gen):
    assert gen.n_obs > 0, "no cells generated"
    assert gen.obs_names.isin(src.obs_names).all(), (
        "obs_names are not the source's: " + ", ".join(gen.obs_names[:3]))
    assert gen.obs_names.is_unique, "a cell was written twice"
    rows = src.obs.loc[gen.obs_names]
    for col in src.obs.columns:
        assert col in gen.obs.columns, f"obs column {col!r} is missing"
        got, want = gen.obs[col], rows[col]
        if isinstance(want.dtype, pd.CategoricalDtype):
            assert isinstance(got.dtype, pd.CategoricalDtype), f"{col}: {got.dtype}, not categorical"
            assert list(got.astype(str)) == list(want.astype(str)), f"{col}: other categories"
        else:
            assert got.dtype == want.dtype, f"{col}: {got.dtype}, not {want.dtype}"
            np.testing.assert_array_equal(got.to_numpy(float), want.to_numpy(float), err_msg=col)
    # cell is the row in the data: the source's row of the same name
    np.testing.assert_array_equal(gen.obs["cell"].to_numpy(), src.obs_names.get_indexer(gen.obs_names))
    assert list(gen.obs.columns[-2:]) == ["cell", "set"], list(gen.obs.columns)


def check_rest(src, gen):
    assert list(gen.var_names) == list(src.var_names), "var_names differ"
    # expression is given (expr_to_pos): X is the source's, not the z-scores the model read
    want = src[gen.obs_names].X
    np.testing.assert_array_equal(gen.X, want.toarray() if hasattr(want, "toarray") else want)
    dims = src.obsm["spatial"].shape[1]
    for key in ("spatial", "spatial_true", "spatial_aligned"):
        assert gen.obsm[key].shape == (gen.n_obs, dims), f"obsm/{key} is {gen.obsm[key].shape}"
        assert np.isfinite(gen.obsm[key]).all(), key
    uns = gen.uns["alphast"]
    assert set(uns) == {"config", "checkpoint", "version", "command", "plugins"}, sorted(uns)
    assert "training_mode: expr_to_pos" in uns["config"], uns["config"][:200]
    assert uns["checkpoint"].endswith("/best.safetensors"), uns["checkpoint"]
    assert uns["command"].startswith("alphast-run sample "), uns["command"]


def check_aligned(gen):
    """spatial_aligned is each set's placement moved rigidly onto the truth."""
    dist = lambda p: np.linalg.norm(p[:, None] - p[None], axis=-1)
    for s in np.unique(gen.obs["set"]):
        rows = (gen.obs["set"] == s).to_numpy()
        np.testing.assert_allclose(dist(gen.obsm["spatial_aligned"][rows]), dist(gen.obsm["spatial"][rows]),
                                   atol=1e-4, err_msg=f"set {s}: not rigid")
    # the first set writes all its cells, so its fit is over these rows: at
    # least as close as the placement centred on the truth, or its mirror image
    rows = (gen.obs["set"] == 0).to_numpy()
    placed, aligned, true = (gen.obsm[k][rows] for k in ("spatial", "spatial_aligned", "spatial_true"))
    err = lambda p: ((p - p.mean(0) + true.mean(0) - true) ** 2).sum()
    assert ((aligned - true) ** 2).sum() <= min(err(placed), err(placed * [1, -1])) + 1e-6, "set 0 is not aligned"


def check_metrics(run_dir):
    m = pd.read_json(f"{run_dir}/metrics.jsonl", lines=True)
    assert {"train", "epoch", "monitor"} <= set(m["kind"]), set(m["kind"])
    assert m["kind"].notna().all() and m["time"].notna().all(), "a line without kind or time"
    assert (m["time"] > 1.6e9).all(), "time is not the wall clock"


def main():
    src, gen = anndata.read_h5ad(sys.argv[1]), anndata.read_h5ad(sys.argv[2])
    check_obs(src, gen)
    check_rest(src, gen)
    check_aligned(gen)
    check_metrics(sys.argv[3])
    print(f"anndata {anndata.__version__}: {gen.n_obs} cells join back on obs_names and "
          f"{len(src.obs.columns)} obs columns")


if __name__ == "__main__":
    main()
