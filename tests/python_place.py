"""place on a tiny run (tests/test_python_place.sh): 60 cells of the data,
in shuffled order, come back with obsm['alphast_spatial'] in their order and
everything else as it was; a run that does not exist is one RuntimeError
with alphast-run's error line.

usage: python_place.py DATA.h5ad RUN_DIR ALPHAST_RUN"""
import sys

import anndata
import numpy as np

import alphast

data, run_dir, alphast_run = sys.argv[1:4]
full = anndata.read_h5ad(data)
cells = np.random.default_rng(0).permutation(full.n_obs)[:60]
adata = full[cells].copy()
names, obs = adata.obs_names.copy(), adata.obs.copy()

assert alphast.place(adata, run_dir, alphast_run=alphast_run) is adata
spatial = adata.obsm["alphast_spatial"]
assert spatial.shape[0] == 60 and spatial.shape[1] in (2, 3), spatial.shape
assert np.isfinite(spatial).all()
assert adata.obs_names.equals(names) and adata.obs.equals(obs), "place changed the cells"

try:
    alphast.place(adata, run_dir + "/no-such-run", alphast_run=alphast_run)
    raise AssertionError("a missing run was accepted")
except RuntimeError as e:
    assert str(e).startswith("alphast-run: ") and "no-such-run" in str(e), e

print(f"place: {spatial.shape[0]} cells placed in {spatial.shape[1]}-D")
