"""The inputs and checks of tests/test_predict.sh (`alphast-run predict`),
with the real anndata.

usage: predict_check.py make DIR            tiny.h5ad (80 cells, 6 genes, 2-D) and
                                            new.h5ad / new.csv (its cells shuffled,
                                            genes permuted, one extra gene, no
                                            coordinates) / lacking.h5ad (no gene g3) /
                                            bad_var.h5ad (a damaged var column)
       predict_check.py cells DIR           cells.h5ad: tiny.h5ad's rows in the
                                            order of DIR/sample.h5ad's obs 'cell'
       predict_check.py positions DIR       positions.h5ad (no X) and positions.csv: the
                                            positions of tiny.h5ad's rows in the order
                                            of DIR/p2e_sample.h5ad's obs 'cell'
       predict_check.py check DIR           the outputs of test_predict.sh
       predict_check.py check_expr DIR      those of its pos_to_expr run
"""
import sys

import shutil

import anndata
import h5py
import numpy as np
import pandas as pd

GENES = [f"g{j}" for j in range(6)]


def make(d):
    rng = np.random.default_rng(0)
    n = 80
    pos = rng.uniform(0, 10, size=(n, 2))
    # expression that follows position, so a run learns something
    x = rng.poisson(1 + np.abs(np.outer(pos[:, 0], [1, 0.5, 0, 0.2, 0.8, 0]) + np.outer(pos[:, 1], [0, 0.5, 1, 0.8, 0, 0.3])))
    obs = pd.DataFrame({"count": np.arange(n, dtype=np.int64), "even": np.arange(n) % 2 == 0,
                        "kind": pd.Categorical(np.where(np.arange(n) % 3 == 0, "a", "b"))},
                       index=[f"cell{i}" for i in range(n)])
    var = pd.DataFrame({"gene_ids": [f"ENSG{j}" for j in range(6)], "n_cells": np.arange(6, dtype=np.int64) * 10,
                        "highly_variable": np.arange(6) % 2 == 0}, index=GENES)
    tiny = anndata.AnnData(X=x.astype(np.float32), obs=obs, var=var)
    tiny.obsm["spatial"] = pos.astype(np.float32)
    tiny.uns["kind_colors"] = np.array(["#1f77b4", "#ff7f0e"])  # scanpy's, one per category
    tiny.write_h5ad(f"{d}/tiny.h5ad")
    # the new cells: shuffled, genes permuted, one gene the run lacks, no coordinates
    order = rng.permutation(n)[:50]
    genes = ["g3", "g0", "extra", "g5", "g1", "g4", "g2"]
    cols = {g: x[order, GENES.index(g)] if g in GENES else rng.poisson(2, size=len(order)) for g in genes}
    new_var = var.reindex(genes)
    new_var.loc["extra"] = ["ENSGx", 1, False]
    new_var = new_var.astype(var.dtypes.to_dict())
    new = anndata.AnnData(X=np.stack([cols[g] for g in genes], 1).astype(np.float32), obs=obs.iloc[order].copy(),
                          var=new_var, uns={"kind_colors": tiny.uns["kind_colors"]})
    new.write_h5ad(f"{d}/new.h5ad")
    frame = pd.DataFrame(new.X.astype(np.int64), index=new.obs_names, columns=genes)
    frame.index.name = "cell"
    frame.to_csv(f"{d}/new.csv")
    new[:, [g for g in genes if g != "g3"]].copy().write_h5ad(f"{d}/lacking.h5ad")
    # a var column of the wrong length: kept only for the output, so left out, never an error
    shutil.copy(f"{d}/new.h5ad", f"{d}/bad_var.h5ad")
    with h5py.File(f"{d}/bad_var.h5ad", "r+") as f:
        del f["var/n_cells"]
        f["var/n_cells"] = np.arange(3)
        f["var/n_cells"].attrs.update({"encoding-type": "array", "encoding-version": "0.2.0"})


def cells(d):
    tiny = anndata.read_h5ad(f"{d}/tiny.h5ad")
    rows = anndata.read_h5ad(f"{d}/sample.h5ad").obs["cell"].to_numpy()
    sub = tiny[rows].copy()
    del sub.obsm["spatial"]
    sub.write_h5ad(f"{d}/cells.h5ad")


def positions(d):
    tiny = anndata.read_h5ad(f"{d}/tiny.h5ad")
    rows = anndata.read_h5ad(f"{d}/p2e_sample.h5ad").obs["cell"].to_numpy()
    sub = anndata.AnnData(obs=tiny.obs.iloc[rows].copy(), obsm={"spatial": tiny.obsm["spatial"][rows]})
    sub.write_h5ad(f"{d}/positions.h5ad")
    with h5py.File(f"{d}/positions.h5ad", "r+") as f:  # positions alone: no expression at all
        if "X" in f:
            del f["X"]
    frame = pd.DataFrame(sub.obsm["spatial"], index=sub.obs_names, columns=["x", "y"])
    frame.index.name = "cell"
    frame.to_csv(f"{d}/positions.csv")


def check_expr(d):
    given = anndata.read_h5ad(f"{d}/positions.h5ad")
    out = anndata.read_h5ad(f"{d}/p2e_out.h5ad")
    assert list(out.obs_names) == list(given.obs_names), "obs_names or their order changed"
    assert list(out.obs["kind"].astype(str)) == list(given.obs["kind"].astype(str)), "obs columns lost"
    assert list(out.var_names) == GENES, list(out.var_names)
    np.testing.assert_array_equal(out.obsm["spatial"], given.obsm["spatial"])
    uns = out.uns["alphast"]
    assert uns["task"] == "pos_to_expr" and uns["expression"].startswith("log1p"), dict(uns)
    # on the run's own test cells, in sample's order: sample's expression
    gen = anndata.read_h5ad(f"{d}/p2e_sample.h5ad")
    np.testing.assert_allclose(out.X, gen.X, rtol=1e-4, atol=1e-4)
    csv = pd.read_csv(f"{d}/p2e_out.csv", index_col=0)
    assert list(csv.columns) == ["x", "y"] + GENES, list(csv.columns)
    assert list(csv.index) == list(given.obs_names), list(csv.index[:3])
    np.testing.assert_allclose(csv[["x", "y"]].to_numpy(), given.obsm["spatial"], rtol=1e-6)
    np.testing.assert_allclose(csv[GENES].to_numpy(), out.X, rtol=1e-5, atol=1e-5)
    # patches of the section, when it takes several sets
    sets = anndata.read_h5ad(f"{d}/p2e_sets.h5ad")
    assert int(sets.uns["alphast"]["sets"]) > 1 and np.isfinite(sets.X).all(), dict(sets.uns["alphast"])


def distances(p):
    return np.linalg.norm(p[:, None, :] - p[None, :, :], axis=-1)


def check(d):
    new = anndata.read_h5ad(f"{d}/new.h5ad")
    out = anndata.read_h5ad(f"{d}/out.h5ad")
    # the cells keep their names, order and obs; X holds the run's genes as read
    assert list(out.obs_names) == list(new.obs_names), "obs_names or their order changed"
    for col in new.obs.columns:
        assert col in out.obs.columns, f"obs column {col!r} is missing"
        got, want = out.obs[col], new.obs[col]
        if isinstance(want.dtype, pd.CategoricalDtype):
            assert list(got.astype(str)) == list(want.astype(str)), col
        else:  # int and bool columns stay so
            assert got.dtype == want.dtype, f"{col}: {got.dtype}, not {want.dtype}"
            np.testing.assert_array_equal(got.to_numpy(float), want.to_numpy(float), err_msg=col)
    assert list(out.var_names) == GENES, list(out.var_names)
    # var columns kept, in the run's gene order; numbers and booleans with
    # their dtypes, strings as categories
    want = new.var.loc[GENES]
    assert list(out.var.columns) == list(want.columns), list(out.var.columns)
    for col in want.columns:
        if want[col].dtype != object:
            assert out.var[col].dtype == want[col].dtype, f"var {col}: {out.var[col].dtype}, not {want[col].dtype}"
        assert list(out.var[col].astype(str)) == list(want[col].astype(str)), f"var {col}"

    assert list(out.uns["kind_colors"]) == ["#1f77b4", "#ff7f0e"], out.uns.get("kind_colors")
    np.testing.assert_array_equal(out.X, new[:, GENES].X)
    p = out.obsm["alphast_spatial"]
    assert p.shape == (new.n_obs, 2) and np.isfinite(p).all(), p.shape
    np.testing.assert_allclose(p.mean(0), 0, atol=1e-5 * np.abs(p).max(), err_msg="not centred on the section")
    uns = out.uns["alphast"]
    assert uns["genes_dropped"] == "1" and uns["genes_missing"] == "", dict(uns)
    assert uns["command"].startswith("alphast-run predict "), uns["command"]
    assert int(uns["sets"]) > 1, "the stitched run was one set"
    # the CSV input places the same cells the same way
    csv = pd.read_csv(f"{d}/out.csv", index_col=0)
    assert list(csv.index) == list(new.obs_names), list(csv.index[:3])
    np.testing.assert_allclose(csv[["x", "y"]].to_numpy(), p, rtol=1e-5, atol=1e-5)
    # zero-filled and listed
    lacking = anndata.read_h5ad(f"{d}/lacking_out.h5ad")
    assert lacking.uns["alphast"]["genes_missing"] == "g3", dict(lacking.uns["alphast"])
    assert (lacking[:, "g3"].X == 0).all()
    assert np.isnan(lacking.var.loc["g3", "n_cells"]) and lacking.var["gene_ids"].isna()["g3"], lacking.var
    # a damaged var column: the placement all the same, without var columns
    bad = anndata.read_h5ad(f"{d}/bad_var_out.h5ad")
    assert list(bad.var.columns) == [], list(bad.var.columns)
    np.testing.assert_array_equal(bad.obsm["alphast_spatial"], p)
    # on the run's own test cells, in sample's order: sample's placement
    gen = anndata.read_h5ad(f"{d}/sample.h5ad")
    assert list(gen.uns["kind_colors"]) == ["#1f77b4", "#ff7f0e"], "sample lost the colours"
    assert gen.var["highly_variable"].dtype == bool and list(gen.var["n_cells"]) == [0, 10, 20, 30, 40, 50], gen.var
    own = anndata.read_h5ad(f"{d}/own.h5ad")
    placed = own.obsm["alphast_spatial"] / float(own.uns["alphast"]["length_unit"])
    np.testing.assert_allclose(distances(placed), distances(gen.obsm["spatial"]), rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    {"make": make, "cells": cells, "positions": positions, "check": check, "check_expr": check_expr}[sys.argv[1]](sys.argv[2])
