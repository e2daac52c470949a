"""place: the cells of an AnnData placed by a trained run, through
`alphast-run predict` on a temporary copy of it."""
import os
import subprocess
import tempfile

import anndata
import numpy as np


def _options(options):
    """Keyword arguments as predict's options: allow_missing_genes=True is
    --allow-missing-genes, steps=50 is --steps 50."""
    args = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is not False and value is not None:
            args += [flag, str(value)]
    return args


def place(adata, run_dir, alphast_run="alphast-run", overrides=(), **options):
    """Places the cells of `adata` with the run in `run_dir`: writes it to a
    temporary .h5ad, runs `alphast-run predict RUN_DIR --data TMP.h5ad --out
    OUT.h5ad` and stores OUT's obsm['alphast_spatial'] in
    adata.obsm['alphast_spatial'], in adata's cell order. `overrides` are
    KEY=VALUE config overrides and `options` predict's options (see
    `alphast-run predict --help`). Returns adata. Raises RuntimeError with
    alphast-run's error line when it fails."""
    with tempfile.TemporaryDirectory(prefix="alphast-place.") as tmp:
        data, out = os.path.join(tmp, "cells.h5ad"), os.path.join(tmp, "placed.h5ad")
        adata.write_h5ad(data)
        cmd = [alphast_run, "predict", os.fspath(run_dir), "--data", data, "--out", out]
        done = subprocess.run(cmd + _options(options) + list(overrides), capture_output=True, text=True)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            raise RuntimeError(lines[-1] if lines else f"{alphast_run} predict exited with {done.returncode}")
        placed = anndata.read_h5ad(out)
        spatial = np.asarray(placed.obsm["alphast_spatial"])
    if not placed.obs_names.equals(adata.obs_names):  # predict keeps the cells and their order
        raise RuntimeError(f"{alphast_run} predict returned other cells than it was given, or in another order")
    adata.obsm["alphast_spatial"] = spatial
    return adata
