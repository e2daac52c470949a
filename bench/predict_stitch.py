"""Stitched against per-set placements (docs/predict.md): places a trained
run's held-out test cells with `alphast-run predict` at several set sizes
and scores each section's one frame against the truth, beside the
evaluation's per-set score at the same set size (every set scored in its
own frame, on its own cells only).

usage: predict_stitch.py RUN_DIR DATA.h5ad [MAX_SET_SIZE ...]   (default 1024 128 64)
  with alphast-run on the PATH, or ALPHAST_RUN=path/to/alphast-run
"""
import json
import os
import subprocess
import sys
import tempfile

import anndata
import numpy as np
from scipy.stats import rankdata

RUN = os.environ.get("ALPHAST_RUN", "alphast-run")


def dist_row_spearman(pred, true):
    """LUNA's per-cell score: Spearman of a cell's distances to the others, averaged over cells."""
    n = len(true)
    off = ~np.eye(n, dtype=bool)
    dp = np.linalg.norm(pred[:, None] - pred[None], axis=-1)[off].reshape(n, n - 1)
    dt = np.linalg.norm(true[:, None] - true[None], axis=-1)[off].reshape(n, n - 1)
    rp, rt = rankdata(dp, axis=1), rankdata(dt, axis=1)
    rp -= rp.mean(1, keepdims=True)
    rt -= rt.mean(1, keepdims=True)
    return float(np.mean((rp * rt).sum(1) / np.sqrt((rp ** 2).sum(1) * (rt ** 2).sum(1))))


def main(run_dir, data, sizes):
    src = anndata.read_h5ad(data)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([RUN, "sample", run_dir, "--out", f"{tmp}/sample.h5ad"], check=True, capture_output=True)
        rows = np.sort(anndata.read_h5ad(f"{tmp}/sample.h5ad").obs["cell"].to_numpy())
        test = src[rows].copy()
        truth = test.obsm["spatial"][:, :2] if test.obsm["spatial"].shape[1] == 2 else test.obsm["spatial"]
        del test.obsm["spatial"]
        test.write_h5ad(f"{tmp}/test.h5ad")
        print("| max_set_size | sets | stitched, per section (sorted by name) | per set (eval) |")
        print("| ---: | ---: | ---: | ---: |")
        for m in sizes:
            subprocess.run([RUN, "predict", run_dir, "--data", f"{tmp}/test.h5ad", "--out", f"{tmp}/p.h5ad",
                            f"evaluation.max_set_size={m}"], check=True, capture_output=True)
            placed = anndata.read_h5ad(f"{tmp}/p.h5ad")
            key = placed.uns["alphast"]["config"].split("slice_key:")[1].split("\n")[0].strip()
            section = test.obs[key].astype(str).to_numpy() if key not in ("null", "~", "") else np.zeros(len(test))
            p = placed.obsm["alphast_spatial"]
            scores = [dist_row_spearman(p[section == s], truth[section == s]) for s in np.unique(section)]
            subprocess.run([RUN, "eval", run_dir, "--json", f"{tmp}/e.json", f"evaluation.max_set_size={m}"],
                           check=True, capture_output=True)
            per_set = json.load(open(f"{tmp}/e.json"))
            model = per_set["tasks"]["expr_to_pos"]["model"]["positions"]
            print(f"| {m} | {placed.uns['alphast']['sets']} | {' / '.join(f'{s:.3f}' for s in scores)} | "
                  f"{model['dist_row_spearman']:.3f} ({per_set['sets']} sets) |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], [int(m) for m in sys.argv[3:]] or [1024, 128, 64])
