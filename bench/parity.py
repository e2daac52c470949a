"""`make parity`: alphast's eval forward against the PyTorch twin's.

For each config in bench/configs: parity_setup writes alphast-initialised
weights and padded random inputs, `alphast-run forward` runs them, the twin
loads the same weights and runs the same inputs, and the outputs are
compared (max |a - b| / max |twin|). With --golden DIR (the reference
PyTorch dumps), the twin is first checked against the original model's
outputs, loss and gradients, so the twin itself is known to be right.
"""
import argparse
import os
import subprocess
import sys

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_twin as tw  # noqa: E402

CASES = ["baseline", "gated", "moe", "gated_moe"]
GOLDEN = ["baseline", "gated", "moe", "gated_moe", "gated_moe_full"]
GENES = 100  # compare_configs.py's G


def rel_err(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp(min=1e-30)).item(), (a - b).abs().max().item()


def check_golden(directory, tol_out, tol_grad):
    """The twin on the reference's own weights and inputs; True if within tolerance."""
    import json

    ok = True
    print(f"twin vs the reference model's golden dumps ({directory})")
    for case in GOLDEN:
        meta = json.load(open(os.path.join(directory, f"{case}.json")))
        cfg = meta["cfg"]
        cfg["TransformerLayer_setting"]["expert_hidden"] = meta.get("expert_hidden", "split")
        model = tw.Model(cfg, meta["G"]).eval()
        tw.load_weights(model, os.path.join(directory, f"{case}.weights.safetensors"))
        io = tw.read_safetensors(os.path.join(directory, f"{case}.io.safetensors"))
        mask = io["in.node_mask"]
        e, p, aux = model(io["in.noisy_expression"], io["in.diffusion_time"], io["in.noisy_positions"], mask)
        loss = tw.diffusion_loss(e, p, io["target.expression"], io["target.positions"], mask, aux)
        loss.backward()
        errs = {"expression": rel_err(e, io["out.pred_expression"])[0],
                "positions": rel_err(p, io["out.pred_positions"])[0],
                "loss": rel_err(loss, io["loss.total"])[0]}
        if aux is not None:
            errs["moe_aux"] = rel_err(aux, io["out.moe_aux"])[0]
        grad = max(rel_err(w.grad, io["grad." + n])[0] for n, w in model.named_parameters()
                   if w.grad is not None and "grad." + n in io)
        good = max(errs.values()) <= tol_out and grad <= tol_grad
        ok &= good
        print(f"  {case:15s} " + " ".join(f"{k} {v:.2e}" for k, v in errs.items())
              + f" | max gradient {grad:.2e}  {'ok' if good else 'FAIL'}")
    return ok


def run_case(args, case):
    config = os.path.join(args.configs, f"{case}.yaml")
    prefix = os.path.join(args.work, case)
    subprocess.run([args.setup, config, str(GENES), str(args.seed), prefix], check=True)
    out = prefix + ".alphast.safetensors"
    subprocess.run([args.alphast, "forward", "--config", config, "--weights", prefix + ".weights.safetensors",
                    "--inputs", prefix + ".inputs.safetensors", "--out", out], check=True)
    ours = tw.read_safetensors(out)

    with open(config) as f:
        cfg = yaml.safe_load(f)
    model = tw.Model(cfg, GENES).eval()
    tw.load_weights(model, prefix + ".weights.safetensors")
    x = tw.read_safetensors(prefix + ".inputs.safetensors")
    with torch.no_grad():
        e, p, aux = model(x["expression"], x["t"], x["positions"], x["node_mask"])
    theirs = {"expression": e, "positions": p}
    if aux is not None:
        theirs["moe_aux"] = aux.reshape(1)
    tw.write_safetensors(prefix + ".twin.safetensors", theirs)

    worst, parts = 0.0, []
    for name, ref in theirs.items():
        if name not in ours:
            print(f"  {case}: alphast wrote no '{name}'")
            return False
        rel, absolute = rel_err(ours[name], ref)
        worst = max(worst, rel)
        parts.append(f"{name} rel {rel:.2e} (abs {absolute:.2e})")
    good = worst <= args.tol
    print(f"  {case:10s} " + ", ".join(parts) + f"  {'ok' if good else 'FAIL'}")
    return good


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alphast", required=True, help="the alphast-run program")
    ap.add_argument("--setup", required=True, help="the parity_setup program")
    ap.add_argument("--configs", required=True, help="directory of <case>.yaml")
    ap.add_argument("--work", default="bench/parity", help="where weights, inputs and outputs go")
    ap.add_argument("--golden", default=None, help="reference dumps to check the twin against first")
    ap.add_argument("--seed", type=int, default=7)
    # float32 through 2 layers of different summation orders stays near 1e-6;
    # 1e-4 is the bar and still catches any real semantic difference.
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(int(os.environ.get("OPENBLAS_NUM_THREADS", "2")))

    ok = True
    if args.golden and os.path.isdir(args.golden):
        # golden README: outputs agree to ~1e-5 relative, gradients to ~1e-4
        ok &= check_golden(args.golden, 1e-4, 1e-3)
    print(f"alphast-run forward vs the twin (alphast weights, {len(CASES)} configs, padded inputs, "
          f"tolerance {args.tol:g} relative to the twin's largest value)")
    for case in CASES:
        ok &= run_case(args, case)
    print("parity: " + ("all within tolerance" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
