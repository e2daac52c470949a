"""read_run: a run directory's metrics, held-out scores and config."""
import json
import os

import pandas as pd
import yaml


def _metrics(run_dir):
    """metrics.jsonl as one table, a row per line (the loop's `train` and
    `epoch` records and the monitors' `monitor` ones, told apart by `kind`)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return pd.DataFrame(columns=["kind", "time", "step", "epoch"])
    return pd.read_json(path, lines=True, precise_float=True, convert_dates=False)  # as written, to the bit


def _scores(method):
    """One method's scores of a task, its groups (positions, expression)
    flattened as eval.json's metric names are unique across them; Moran's I
    per gene as morans_i.GENE."""
    row = {}
    for group, values in method.items():
        if not isinstance(values, dict):
            continue
        prefix = "morans_i." if group == "morans_i" else ""
        row.update({prefix + name: v for name, v in values.items() if isinstance(v, (int, float))})
    return row


def _eval_table(run_dir):
    """eval.json as a table: a row per (task, method), the model and each
    baseline, a column per metric. None when the run has no eval.json (no
    test split, or training has not ended)."""
    path = os.path.join(run_dir, "eval.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        report = json.load(f)
    rows = []
    for task, result in report.get("tasks", {}).items():
        methods = {"model": result.get("model", {}), **result.get("baselines", {})}
        if "random" in result:  # eval.json from before the baselines
            methods["random"] = result["random"]
        rows += [{"task": task, "method": name, **_scores(scores)} for name, scores in methods.items()]
    return pd.DataFrame(rows).set_index(["task", "method"]) if rows else pd.DataFrame()


def read_run(run_dir):
    """(metrics, eval_table, config) of the run directory that
    `alphast-run train --out RUN_DIR` wrote: metrics.jsonl as a DataFrame,
    eval.json as a DataFrame indexed by (task, method) (None without one),
    and config.yaml, the resolved config, as a dict."""
    path = os.path.join(run_dir, "config.yaml")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{run_dir}: not a run directory (no config.yaml); pass the --out DIR of alphast-run train")
    with open(path) as f:
        config = yaml.safe_load(f)
    return _metrics(run_dir), _eval_table(run_dir), config
