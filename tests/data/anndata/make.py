#!/usr/bin/python3
"""Writes the AnnData files of tests/data/anndata (see README.md) with the
anndata library, and with h5py only for the layouts anndata 0.8 cannot
write (the 0.7 layouts and files with a part removed).

Run with Debian's python (anndata 0.8, h5py 3.7): /usr/bin/python3 make.py
"""
import os
import warnings

import anndata as ad
import h5py
import numpy as np
import pandas as pd
import scipy.sparse as sp

warnings.simplefilter("ignore")  # anndata's FutureWarnings about pandas
HERE = os.path.dirname(os.path.abspath(__file__))
N_CELLS, N_GENES = 6, 4

# Counts: integers, cell c gene g = (c + 1) * (g + 1) % 5 (zeros included).
COUNTS = np.array([[(c + 1) * (g + 1) % 5 for g in range(N_GENES)] for c in range(N_CELLS)], dtype=np.float32)
GENES = ["Gad1", "Sst", "Vip", "Pvalb"]
CELLS = [f"cell{c}" for c in range(N_CELLS)]
XY = np.array([[c, 2.0 * c] for c in range(N_CELLS)], dtype=np.float32)


def path(name):
    return os.path.join(HERE, name)


def basic(X=COUNTS, **kw):
    """The 6 x 4 counts, named cells and genes, obsm/spatial [6, 2]."""
    a = ad.AnnData(X, obs=pd.DataFrame(index=CELLS), var=pd.DataFrame(index=GENES), **kw)
    a.obsm["spatial"] = XY
    return a


def index_named():
    """var.index.name = 'gene_symbol', obs.index.name = 'barcode': the
    indexes are var/gene_symbol and obs/barcode, named by `_index`."""
    a = basic()
    a.var.index.name = "gene_symbol"
    a.obs.index.name = "barcode"
    a.write_h5ad(path("index_named.h5ad"))


def obsm_dataframe():
    """obsm['spatial'] a DataFrame with columns x and y."""
    a = basic()
    a.obsm["spatial"] = pd.DataFrame({"x": XY[:, 0].astype(np.float64), "y": XY[:, 1]}, index=CELLS)
    a.write_h5ad(path("obsm_dataframe.h5ad"))


def lzf():
    """Every dataset LZF-compressed (h5py's filter 32000); X sparse."""
    a = basic(sp.csr_matrix(COUNTS))
    a.obs["slice"] = pd.Categorical(["s0"] * 3 + ["s1"] * 3)
    a.write_h5ad(path("lzf.h5ad"), compression="lzf")


def nan_category():
    """Categorical obs columns with missing values (pandas NaN, code -1)."""
    a = basic()
    a.obs["cell_type"] = pd.Categorical(["ex", None, "in", "ex", None, "in"])
    a.obs["slice"] = pd.Categorical(["s0", "s0", None, "s1", "s1", "s1"])
    a.write_h5ad(path("nan_category.h5ad"))


def obs_columns():
    """One obs column of every kind anndata writes."""
    a = basic()
    a.obs["category"] = pd.Categorical(["b", "a", "b", None, "a", "b"], categories=["b", "a"])
    a.obs["int_category"] = pd.Categorical([3, 1, 3, 1, 1, 3])
    a.obs["label"] = [f"id{c}" for c in range(N_CELLS)]  # unique strings stay a string array
    a.obs["count"] = np.arange(N_CELLS, dtype=np.int64) * 10
    a.obs["score"] = np.array([0.5, np.nan, 1.5, 2.5, 3.5, 4.5])
    a.obs["flag"] = np.array([True, False, True, False, True, False])
    a.obs["nullable_int"] = pd.array([1, None, 3, 4, None, 6], dtype="Int64")
    a.obs["nullable_bool"] = pd.array([True, None, False, True, False, None], dtype="boolean")
    a.write_h5ad(path("obs_columns.h5ad"))


def scanpy_state():
    """The usual state after scanpy's normalize_total + log1p on the
    highly variable genes: X log-normalised (3 of the 4 genes), the counts
    in layers['counts'] and all 4 genes' counts in raw; uns['log1p']."""
    counts = COUNTS[:, :3]
    totals = counts.sum(axis=1, keepdims=True)
    X = np.log1p(counts / np.where(totals > 0, totals, 1) * 1e4).astype(np.float32)
    a = ad.AnnData(sp.csr_matrix(X), obs=pd.DataFrame(index=CELLS), var=pd.DataFrame(index=GENES[:3]))
    a.obsm["spatial"] = XY
    a.layers["counts"] = sp.csr_matrix(counts)
    a.raw = ad.AnnData(sp.csr_matrix(COUNTS), var=pd.DataFrame(index=GENES))
    a.uns["log1p"] = {"base": None}
    a.write_h5ad(path("scanpy_state.h5ad"))


def x_without_indptr():
    """A sparse X whose indptr dataset is missing."""
    a = basic(sp.csr_matrix(COUNTS))
    a.write_h5ad(path("x_without_indptr.h5ad"))
    with h5py.File(path("x_without_indptr.h5ad"), "r+") as f:
        del f["X/indptr"]


def var_index_missing():
    """var's `_index` attribute names a dataset that is not there."""
    a = basic()
    a.var.index.name = "gene_symbol"
    a.write_h5ad(path("var_index_missing.h5ad"))
    with h5py.File(path("var_index_missing.h5ad"), "r+") as f:
        del f["var/gene_symbol"]


def dup_categories():
    """A categorical obs 'slice' whose categories are [s0, s0], which
    pandas refuses (anndata cannot write it: the categories are replaced)."""
    a = basic()
    a.obs["slice"] = pd.Categorical(["s0"] * 3 + ["s1"] * 3)
    a.write_h5ad(path("dup_categories.h5ad"))
    with h5py.File(path("dup_categories.h5ad"), "r+") as f:
        f["obs/slice/categories"][1] = "s0"


def not_utf8():
    """obs names of latin-1 bytes ('caf\xe90'...) in an ASCII string
    dataset, which anndata cannot decode."""
    a = basic()
    a.write_h5ad(path("not_utf8.h5ad"))
    with h5py.File(path("not_utf8.h5ad"), "r+") as f:
        attrs = dict(f["obs/_index"].attrs)
        del f["obs/_index"]
        names = np.array([f"caf\xe9{c}".encode("latin-1") for c in range(N_CELLS)], dtype=object)
        d = f["obs"].create_dataset("_index", data=names, dtype=h5py.string_dtype("ascii"))
        d.attrs.update(attrs)


def dup_var_names():
    """var names with Gad1 twice (anndata warns 'Variable names are not
    unique')."""
    a = ad.AnnData(COUNTS, obs=pd.DataFrame(index=CELLS), var=pd.DataFrame(index=["Gad1", "Sst", "Gad1", "Pvalb"]))
    a.obsm["spatial"] = XY
    a.write_h5ad(path("dup_var_names.h5ad"))


def layer_rows():
    """layers['counts'] of 8 rows and raw/X of 5 for the 6 cells of obs."""
    a = basic()
    a.raw = a
    a.write_h5ad(path("layer_rows.h5ad"))
    with h5py.File(path("layer_rows.h5ad"), "r+") as f:
        f["layers"].create_dataset("counts", data=np.ones((N_CELLS + 2, N_GENES), np.float32))
        del f["raw/X"]
        f["raw"].create_dataset("X", data=np.ones((N_CELLS - 1, N_GENES), np.float32))


def nullable_strings():
    """anndata >= 0.11's nullable-string-array (pandas' StringDtype), which
    anndata 0.8 cannot write: obs 'slice' with a missing value, 'label'
    with none."""
    a = basic()
    a.write_h5ad(path("nullable_strings.h5ad"))
    with h5py.File(path("nullable_strings.h5ad"), "r+") as f:
        obs = f["obs"]
        columns = {"slice": (["s0", "s0", "", "s1", "s1", "s1"], [False, False, True, False, False, False]),
                   "label": ([f"id{c}" for c in range(N_CELLS)], [False] * N_CELLS)}
        for name, (values, mask) in columns.items():
            g = obs.create_group(name)
            g.attrs["encoding-type"] = "nullable-string-array"
            g.attrs["encoding-version"] = "0.1.0"
            g.create_dataset("values", data=np.array(values, dtype=object), dtype=h5py.string_dtype())
            g.create_dataset("mask", data=np.array(mask))
        obs.attrs["column-order"] = np.array(list(columns), dtype=object)


# ---- anndata 0.7 (written with h5py, as anndata 0.7's _io/h5ad.py did) ----

VLEN = h5py.special_dtype(vlen=str)


def frame_07(f, key, index, columns, index_name="_index"):
    """anndata 0.7's write_dataframe: a group with `_index` and
    `column-order`; strings as variable-length string datasets without
    encoding attributes; categoricals as a codes dataset whose
    `categories` attribute is an object reference to
    __categories/<column>, which holds the categories and `ordered`."""
    g = f.create_group(key)
    g.attrs["encoding-type"] = "dataframe"
    g.attrs["encoding-version"] = "0.1.0"
    g.attrs["column-order"] = np.array(list(columns), dtype=object) if columns else np.array([], dtype=np.float64)
    g.attrs["_index"] = index_name
    g.create_dataset(index_name, data=np.array(index, dtype=object), dtype=VLEN)
    for name, values in columns.items():
        if isinstance(values, pd.Categorical):
            cats = g.create_dataset(f"__categories/{name}", data=np.array(values.categories, dtype=object), dtype=VLEN)
            cats.attrs["ordered"] = values.ordered
            g.create_dataset(name, data=values.codes)
            g[name].attrs["categories"] = cats.ref
        else:
            g[name] = values


def sparse_07(f, key, m, h5sparse):
    """A sparse matrix: anndata 0.7.0's h5sparse attributes
    (h5sparse_format, h5sparse_shape), or from 0.7.2 on encoding-type and
    shape; resizable datasets (maxshape None) as anndata made them."""
    g = f.create_group(key)
    if h5sparse:
        g.attrs["h5sparse_format"] = m.format
        g.attrs["h5sparse_shape"] = np.array(m.shape)
    else:
        g.attrs["encoding-type"] = f"{m.format}_matrix"
        g.attrs["encoding-version"] = "0.1.0"
        g.attrs["shape"] = np.array(m.shape)
    for part in ("data", "indices", "indptr"):
        g.create_dataset(part, data=getattr(m, part), maxshape=(None,))


def anndata_07(name, h5sparse, fmt):
    """6 cells x 4 genes, obs 'slice' categorical and 'depth' numeric, raw
    with the same counts, an empty uns: no encoding attributes at the root
    or on arrays."""
    m = sp.csr_matrix(COUNTS) if fmt == "csr" else sp.csc_matrix(COUNTS)
    with h5py.File(path(name), "w") as f:
        sparse_07(f, "X", m, h5sparse)
        frame_07(f, "obs", CELLS, {"slice": pd.Categorical(["s0"] * 3 + ["s1"] * 3),
                                   "depth": np.arange(N_CELLS, dtype=np.float64)})
        frame_07(f, "var", GENES, {})
        f.create_group("obsm").create_dataset("spatial", data=XY)
        raw = f.create_group("raw")
        raw.attrs["encoding-type"] = "raw"
        raw.attrs["encoding-version"] = "0.1.0"
        raw.attrs["shape"] = np.array(COUNTS.shape)
        sparse_07(f, "raw/X", m, h5sparse)
        frame_07(f, "raw/var", GENES, {})
        for empty in ("layers", "uns", "varm", "obsp", "varp"):
            f.create_group(empty)


if __name__ == "__main__":
    index_named()
    obsm_dataframe()
    lzf()
    nan_category()
    obs_columns()
    scanpy_state()
    x_without_indptr()
    var_index_missing()
    dup_categories()
    not_utf8()
    dup_var_names()
    layer_rows()
    nullable_strings()
    anndata_07("anndata_0.7.h5ad", h5sparse=False, fmt="csr")
    anndata_07("anndata_0.7.0.h5ad", h5sparse=True, fmt="csc")
