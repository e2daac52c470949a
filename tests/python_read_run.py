"""read_run on a finished run (tests/test_python.sh): the metrics table holds
every line of metrics.jsonl, the eval table eval.json's numbers, the config
the run's resolved config.yaml.

usage: python_read_run.py RUN_DIR"""
import json
import os
import sys

import alphast

run_dir = sys.argv[1]
metrics, scores, config = alphast.read_run(run_dir)

with open(os.path.join(run_dir, "metrics.jsonl")) as f:
    lines = [json.loads(line) for line in f]
assert len(metrics) == len(lines), (len(metrics), len(lines))
assert list(metrics["kind"]) == [line["kind"] for line in lines]
train = metrics[metrics["kind"] == "train"]
assert list(train["loss"]) == [line["loss"] for line in lines if line["kind"] == "train"]
assert list(train["step"]) == [1, 2, 3, 4], list(train["step"])
assert set(metrics["kind"]) == {"train", "epoch", "monitor"}, set(metrics["kind"])

with open(os.path.join(run_dir, "eval.json")) as f:
    report = json.load(f)
task = report["tasks"]["expr_to_pos"]
assert scores.loc[("expr_to_pos", "model"), "knn_k10"] == task["model"]["positions"]["knn_k10"]
for name, base in task["baselines"].items():
    assert scores.loc[("expr_to_pos", name), "rmsd"] == base["positions"]["rmsd"], name
gene = next(iter(task["model"]["morans_i"]))
assert scores.loc[("expr_to_pos", "model"), "morans_i." + gene] == task["model"]["morans_i"][gene]

assert config["training_mode"] == "expr_to_pos"
assert config["training"]["epochs"] == 2 and config["data"]["set_size"] == 24, config["training"]
assert config["data"]["path"].endswith("visium_prostate.h5ad")

try:
    alphast.read_run(os.path.join(run_dir, "no-such-run"))
    raise AssertionError("a directory without config.yaml was read")
except FileNotFoundError as e:
    assert "not a run directory" in str(e), e

print(f"read_run: {len(metrics)} metric lines, {len(scores)} scored methods, {len(config)} config sections")
