"""`make bench-torch`: the PyTorch twin timed as `make bench` times alphast.

Same sections, sizes, seeds-style inputs, step (forward, diffusion loss,
backward, clip 1.0, AdamW with AMSGrad) and thread count
(OPENBLAS_NUM_THREADS, default 2, via torch.set_num_threads). --precision
bf16-mixed runs forward and loss under torch.autocast("cpu", bfloat16), as
bench_model --precision bf16-mixed runs alphast's bf16 mode. Each
measurement runs in a child process of its own, which reports its peak RSS
(VmHWM). Writes JSON in the format of bench/results/alphast.json.

--device cuda runs on the GPU as bench_model --device cuda does: float32
with TF32 off (alphast's cuBLAS math), torch.cuda.synchronize() closing
every timed step, the peak of torch.cuda.max_memory_allocated as
device_mb, and --precision bf16-mixed as torch.autocast("cuda", bfloat16).
A size that runs out of GPU memory is recorded as OOM, not a crash. More
sections: reference32 (B=32 sets), cells (the gated model, G=200, one set
of 4k ... --max-cells cells), sample (reverse diffusion with the twin's
sampler, torch_twin.sample_positions: ms per network evaluation and cells
per second, reference size, as bench_model's sample section).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_twin as tw  # noqa: E402

CONFIGS = ["baseline", "gated", "moe", "gated_moe"]
LR, WD, CLIP = 1e-4, 1e-5, 1.0
GATED_E, GATED_H = 128, 4          # BASE_CONFIG width of the gated-attention scaling
MOE_E, MOE_WIDTH, MOE_TOKENS = 256, 256, (4, 512)


def model_cfg(config, size):
    """The ablation config (docs/model.md §10.1) at the demo or reference size, as bench_cases.c."""
    demo = size == "demo"
    tl = {"num_layers": 2 if demo else 6, "num_heads": 4 if demo else 8, "dim_ff_expression": 256 if demo else 1024,
          "dim_ff_diffusion_time": 64 if demo else 256, "dropout": 0.1, "layer_norm_eps": 1e-6,
          "use_gated_attention": config in ("gated", "gated_moe"), "gate_type": "headwise", "use_qk_norm": True,
          "use_moe": config in ("moe", "gated_moe"), "num_experts": 4, "moe_top_k": 2,
          "moe_load_balance_loss_weight": 0.01}
    cfg = {"mlp_in_expression_setting": {"mlp_in_expression_dims": 64 if demo else 128,
                                         "mlp_out_expression_dims": 128 if demo else 256},
           "mlp_in_diffusion_time_setting": {"mlp_in_diffusion_time_dims": 32 if demo else 64,
                                             "mlp_out_diffusion_time_dims": 32 if demo else 64},
           "PositionMLP_setting": {"hidden_dims": 32 if demo else 64},
           "TransformerLayer_setting": tl,
           "mlp_out_expression_setting": {"hidden_dims": 128 if demo else 512},
           "mlp_out_position_norm_setting": {"hidden_dims": 64 if demo else 128}}
    return cfg, (100 if demo else 2000), 4, (50 if demo else 512)


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


DEVICE = "cpu"  # --device, set in main() and child()


def sync():
    """A GPU runs a step's kernels asynchronously: a timed step ends when they have."""
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def to_device(*tensors):
    return [t.to(DEVICE) for t in tensors]


def time_steps(fn, warmup, steps, budget_s=0.0):
    """Median wall and CPU seconds and the minimum wall seconds of the timed calls."""
    timed = fn

    def fn():
        timed()
        sync()

    start = time.perf_counter()
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    while len(wall) < steps and (not wall or budget_s <= 0 or time.perf_counter() - start < budget_s):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    return {"steps": len(wall), "step_median_s": statistics.median(wall), "step_min_s": min(wall),
            "step_cpu_s": statistics.median(cpu)}


def adamw(params):
    return torch.optim.AdamW(params, lr=LR, weight_decay=WD, amsgrad=True)


def run_model(spec, warmup, steps, precision):
    cfg, genes, sets, cells = model_cfg(spec["config"], spec["size"])
    genes, sets, cells = spec.get("genes", genes), spec.get("sets", sets), spec.get("cells", cells)
    model = tw.Model(cfg, genes).to(DEVICE)
    opt = adamw(model.parameters())
    z_expr, z_pos = torch.randn(sets, cells, genes), torch.randn(sets, cells, 3)
    expr, pos = torch.log1p(10 * torch.rand(sets, cells, genes)), 10 * torch.randn(sets, cells, 3)
    t = torch.randint(1, 1001, (sets, 1)).float() / 1000
    mask = torch.ones(sets, cells)
    z_expr, z_pos, expr, pos, t, mask = to_device(z_expr, z_pos, expr, pos, t, mask)

    def step():
        model.train()
        opt.zero_grad(set_to_none=True)
        with tw.autocast(precision, DEVICE):
            e, p, aux = model(z_expr, t, z_pos, mask)
            loss = tw.diffusion_loss(e, p, expr, pos, mask, aux)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()

    def evaluate():
        model.eval()
        with torch.no_grad(), tw.autocast(precision, DEVICE):
            model(z_expr, t, z_pos, mask)

    out = time_steps(step, warmup, steps)
    out["eval_median_s"] = time_steps(evaluate, warmup, steps)["step_median_s"]
    out["params"] = sum(p.numel() for p in model.parameters())
    return out


def run_gated(spec, warmup, steps, budget_s, precision):
    attn = tw.GatedMultiHeadAttention(GATED_E, GATED_H, "headwise", True, 0.1).train().to(DEVICE)
    opt = adamw(attn.parameters())
    x = torch.randn(1, spec["cells"], GATED_E, device=DEVICE, requires_grad=True)
    target = torch.randn(1, spec["cells"], GATED_E, device=DEVICE)

    def step():
        opt.zero_grad(set_to_none=True)
        with tw.autocast(precision, DEVICE):
            loss = F.mse_loss(attn(x), target)
        loss.backward()
        opt.step()

    out = time_steps(step, warmup, steps, budget_s)
    out["params"] = sum(p.numel() for p in attn.parameters())
    return out


def run_moe(spec, warmup, steps, precision):
    cfg, _, _, _ = model_cfg("moe", "demo")
    tl = cfg["TransformerLayer_setting"]
    cfg["mlp_in_expression_setting"]["mlp_out_expression_dims"] = MOE_E
    tl.update({"dim_ff_expression": MOE_WIDTH, "num_experts": spec["experts"], "expert_hidden": "full"})
    moe = tw.MoEFFN(tw.Dims(cfg, 100)).train().to(DEVICE)
    opt = adamw(moe.parameters())
    x = torch.randn(*MOE_TOKENS, MOE_E, device=DEVICE, requires_grad=True)
    target = torch.randn(*MOE_TOKENS, MOE_E, device=DEVICE)

    def step():
        opt.zero_grad(set_to_none=True)
        with tw.autocast(precision, DEVICE):
            y, aux = moe(x)
            loss = F.mse_loss(y, target) + aux
        loss.backward()
        opt.step()

    out = time_steps(step, warmup, steps)
    out["params"] = sum(p.numel() for p in moe.parameters())
    return out


SAMPLE_EVALS, PASS_CELLS = 50, 1024  # bench_model.c's sampling section; core/eval/sample.c's cells per pass


def run_sample(spec, warmup):
    """Positions generated from expression (tw.sample_positions) for the reference size's B sets of N cells,
    the 1000-step schedule walked in SAMPLE_EVALS network evaluations of PASS_CELLS cells each, as
    bench_model's sample section: an untimed warm-up call of `warmup` evaluations (at least one), then one
    timed call."""
    cfg, genes, sets, cells = model_cfg(spec["config"], "reference")
    model = tw.Model(cfg, genes).to(DEVICE)
    expr = torch.log1p(10 * torch.rand(sets, cells, genes)).to(DEVICE)
    sched = tw.Schedule(1000)
    run = lambda evals: tw.sample_positions(model, sched, expr, evals, pass_sets=max(1, PASS_CELLS // cells))
    run(max(1, warmup))
    sync()
    t0 = time.perf_counter()
    run(SAMPLE_EVALS)
    sync()
    dt, evals = time.perf_counter() - t0, len(tw.sample_grid(1000, SAMPLE_EVALS))
    return {"steps": evals, "step_median_s": dt / evals, "step_min_s": dt / evals, "step_cpu_s": 0.0,
            "cells_per_s": sets * cells / dt, "params": sum(p.numel() for p in model.parameters())}


def use_device(device):
    """float32 on a GPU as alphast computes it: no TF32 tensor cores."""
    global DEVICE
    DEVICE = device
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def child(spec, args):
    torch.manual_seed(args.seed)
    torch.set_num_threads(threads())
    use_device(args.device)
    try:
        if spec["kind"] == "model":
            out = run_model(spec, args.warmup, args.steps, args.precision)
        elif spec["kind"] == "sample":
            out = run_sample(spec, args.warmup)
        elif spec["kind"] == "gated":
            out = run_gated(spec, spec["warmup"], 3, args.budget, args.precision)
        else:
            out = run_moe(spec, args.warmup, args.steps, args.precision)
        out.update(ok=True, peak_rss_mb=peak_rss_mb(), threads=torch.get_num_threads())
        if DEVICE == "cuda":
            out["device_mb"] = torch.cuda.max_memory_allocated() / 2 ** 20
    except torch.cuda.OutOfMemoryError as err:
        out = {"ok": False, "oom": True, "error": "OOM: " + str(err).splitlines()[0]}
    except RuntimeError as err:  # out of memory on the CPU and the like: report, go on with the next
        out = {"ok": False, "error": str(err).splitlines()[0]}
    print(json.dumps(out))


def in_child(spec, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec), "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--budget", str(args.budget), "--seed", str(args.seed),
           "--precision", args.precision, "--device", args.device]
    res = subprocess.run(cmd, capture_output=True, text=True)
    lines = res.stdout.strip().splitlines()
    if res.returncode or not lines:
        return {"ok": False, "error": f"child exit {res.returncode}: {res.stderr.strip()[-200:]}"}
    return json.loads(lines[-1])


def threads():
    return max(1, int(os.environ.get("OPENBLAS_NUM_THREADS", "2") or 2))


def sgemm_peak(n=2048, reps=5):
    torch.set_num_threads(threads())
    a, b = to_device(torch.randn(n, n), torch.randn(n, n))
    torch.mm(a, b)
    sync()
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, b)
        sync()
        best = max(best, 2.0 * n ** 3 / (time.perf_counter() - t0) * 1e-9)
    return best


def row(label, r):
    if not r.get("ok"):
        return f"{label:20s} {r.get('skipped') or r.get('error')}"
    ev = f"{1e3 * r['eval_median_s']:9.2f}" if "eval_median_s" in r else " " * 9
    return (f"{label:20s} {r['params']:10d} {1e3 * r['step_median_s']:9.2f} {1e3 * r['step_cpu_s']:9.2f} {ev} "
            f"{r['peak_rss_mb']:8.0f} {r['steps']:6d}")


HEADER = f"{'':20s} {'params':>10s} {'step ms':>9s} {'cpu ms':>9s} {'eval ms':>9s} {'RSS MB':>8s} {'steps':>6s}"


def main():
    ap = argparse.ArgumentParser(description="PyTorch twin benchmark")
    ap.add_argument("--sections", default="demo,reference,gated,moe,sample")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--max-cells", type=int, default=32768)
    # the naive N x N attention of the twin: skip sizes whose probabilities
    # and their gradient buffers would not fit in this much memory
    ap.add_argument("--max-attn-gb", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--precision", choices=["32-true", "bf16-mixed"], default="32-true",
                    help="bf16-mixed: forward and loss under torch.autocast(device, dtype=torch.bfloat16)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: on the GPU, float32 without TF32, steps timed to torch.cuda.synchronize()")
    ap.add_argument("--json", default="bench/results/pytorch.json")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--compare", default=None, help="ignored (the alphast bench prints the comparison)")
    args = ap.parse_args()
    if args.child:
        return child(json.loads(args.child), args)

    sections = args.sections.split(",")
    use_device(args.device)
    peak = sgemm_peak()
    print(f"PyTorch twin bench (torch {torch.__version__}): threads {threads()}, torch.mm 2048^3 best of 5 "
          f"{peak:.1f} GFLOP/s; medians over {args.steps} steps after {args.warmup} warm-up; precision {args.precision}; "
          f"device {args.device}")
    result = {"impl": "pytorch", "precision": args.precision, "device": args.device, "torch": torch.__version__,
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "threads": threads(), "sgemm_gflops": peak,
              "models": [], "scaling": {}}
    for size in ("demo", "reference"):
        if size not in sections:
            continue
        print(f"\n== {size} size ==\n{HEADER}")
        for config in [c for c in CONFIGS if c in args.configs.split(",")]:
            r = in_child({"kind": "model", "config": config, "size": size}, args)
            r.update(name=f"{size}/{config}", config=config, size=size)
            result["models"].append(r)
            print(row(r["name"], r), flush=True)
    if "reference32" in sections:
        print(f"\n== reference size, B=32 sets ==\n{HEADER}")
        for config in [c for c in CONFIGS if c in args.configs.split(",")]:
            r = in_child({"kind": "model", "config": config, "size": "reference", "sets": 32}, args)
            r.update(name=f"reference-b32/{config}", config=config, size="reference")
            result["models"].append(r)
            print(row(r["name"], r), flush=True)
    if "cells" in sections:
        print(f"\n== the gated model (reference size, G=200), one set of N cells ==\n{HEADER}")
        rows, cells = result["scaling"].setdefault("gated_model_cells", []), 4096
        while cells <= args.max_cells:
            r = in_child({"kind": "model", "config": "gated", "size": "reference", "genes": 200, "sets": 1,
                          "cells": cells}, args)
            r.update(label=str(cells), x=cells)
            rows.append(r)
            print(row(str(cells), r), flush=True)
            if r.get("oom") or (r.get("ok") and 4 * r["step_median_s"] > args.budget):
                break  # more cells need more memory and time: recorded, not tried
            cells *= 2
    if "gated" in sections:
        print(f"\n== gated attention alone (naive N x N softmax), B=1, E={GATED_E}, {GATED_H} heads ==\n{HEADER}")
        # a step is quadratic in N: predict 4x the last size's; long steps skip the warm-up
        rows, last, cells = result["scaling"].setdefault("gated_attention", []), 0.0, 1024
        while cells <= args.max_cells:
            attn_gb = 5 * GATED_H * cells * cells * 4 / 2 ** 30  # S, P, dropout mask, P', dP
            if attn_gb > args.max_attn_gb and args.device == "cpu":
                r = {"ok": False, "skipped": f"skipped: ~{attn_gb:.0f} GB of N x N buffers > {args.max_attn_gb:g} GB"}
            elif 4 * last > args.budget:
                r = {"ok": False, "skipped": f"skipped: one step predicted at {4 * last:.0f} s > budget {args.budget:g} s"}
                last *= 4
            else:
                r = in_child({"kind": "gated", "cells": cells, "warmup": 0 if 4 * last > 10 else 1}, args)
                last = r["step_median_s"] if r.get("ok") else math.inf
            r.update(label=str(cells), x=cells)
            rows.append(r)
            print(row(str(cells), r), flush=True)
            cells *= 2
    if "moe" in sections:
        print(f"\n== MoE FFN alone, top-2, experts {MOE_WIDTH} wide, E={MOE_E}, {MOE_TOKENS[0]}x{MOE_TOKENS[1]} "
              f"tokens ==\n{HEADER}")
        rows = result["scaling"].setdefault("moe_experts", [])
        for n in (4, 8, 16, 32, 64):
            r = in_child({"kind": "moe", "experts": n}, args)
            r.update(label=str(n), x=n)
            rows.append(r)
            print(row(str(n), r), flush=True)
    if "sample" in sections:
        print(f"\n== sampling: positions from expression, reference size, {SAMPLE_EVALS} network evaluations ==\n"
              f"{'model':20s} {'ms per eval':>12s} {'cells per s':>14s}")
        rows = result["scaling"].setdefault("sampling", [])
        for config in [c for c in CONFIGS if c in args.configs.split(",")]:
            r = in_child({"kind": "sample", "config": config}, args)
            r.update(label=config, x=SAMPLE_EVALS)
            rows.append(r)
            print(f"reference/{config:10s} {1e3 * r['step_median_s']:12.2f} {r['cells_per_s']:14.0f}" if r.get("ok")
                  else row(f"reference/{config}", r), flush=True)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
