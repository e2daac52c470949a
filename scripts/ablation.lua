-- The four-config ablation (compare_configs.py's four configs) on the bundled
-- Visium prostate data (2 sections, 1,255 genes: the bundled dataset with
-- learnable signal), 3 seeds each, scored on held-out slabs of both
-- sections with every baseline (docs/evaluation.md):
--
--   Baseline   linear attention + dense FFN
--   Gated      gated attention (headwise gate, QK-norm) + dense FFN
--   MoE        linear attention + MoE FFN (4 experts, top-2)
--   Gated+MoE  both
--   Geodesic   softmax attention biased by the expression graph's geodesic
--              distances (docs/model.md §2.12) + dense FFN
--
-- and with ALPHAST_PRIOR=1 the structural prior's arms (docs/model.md §2.12),
-- Isomap of each set's expression offered to the Baseline model as
--   Prior-in   input channels, Prior-base  the base of the position
--   prediction (x0 = prior + learned residual), Prior-both  both.
--
--   alphast-run sweep scripts/ablation.lua      # 15 runs, ~4 min on 2 cores
--   ALPHAST_DATA=starmap alphast-run sweep ...  # the same on STARmap 3D (osmfish: osmFISH)
--   ALPHAST_SPLIT=random alphast-run sweep ...  # held out by data.split=random (blocks,
--                                               # slab; sections: STARmap's 5 z-sections)
--   ALPHAST_RECIPE=previous ...                 # the recipe before issue 23 (no prior)
--   ALPHAST_SCREEN=1 alphast-run sweep ...      # the Baseline model under candidate
--                                               # recipes (docs/evaluation.md)
--   ALPHAST_QUICK=1 alphast-run sweep ...       # a few steps per run, for tests
--   ALPHAST_DEVICE=cuda alphast-run sweep ...   # every run on that backend (device=)
--
-- report = true writes report.md and report.html into the sweep directory
-- when the runs end (or: alphast-run report SWEEP_DIR).
local a = require "alphast"

local quick = (os.getenv("ALPHAST_QUICK") or "") ~= ""
local data = os.getenv("ALPHAST_DATA") or "visium"
local split = os.getenv("ALPHAST_SPLIT") or ""
local recipe = os.getenv("ALPHAST_RECIPE") or ""
local screen = (os.getenv("ALPHAST_SCREEN") or "") ~= ""

-- 15 runs, 2 at a time: about a minute on an idle 2-core machine (10 epochs
-- of 30 steps take 6-10 s per run); on a busy machine max_minutes stops a run
-- (with its checkpoint and summary) rather than the sweep overrunning.
local budget = quick and {
    "training.epochs=2", "training.steps_per_epoch=3", "training.val_sets=2",
    "training.max_minutes=0.5", "training.scheduler.T_max=2",
} or {
    "training.epochs=10", "training.steps_per_epoch=30", "training.max_minutes=1.2",
    "training.scheduler.T_max=10",
}

-- Monitors say why a config wins; each one is silent on a model without its part.
local monitors = "monitors=[expert_load, gate_activation, grad_norm, time_conditioning]"
for _, b in ipairs{budget} do b[#b + 1] = monitors end

-- A budget in steps whatever the machine's load (the device matrix).
if os.getenv("ALPHAST_MAX_MINUTES") then budget[#budget + 1] = "training.max_minutes=" .. os.getenv("ALPHAST_MAX_MINUTES") end

-- The backend every run trains and samples on (the device matrix's GPU arm).
local device = os.getenv("ALPHAST_DEVICE") or ""
if device ~= "" then budget[#budget + 1] = "device=" .. device end

-- The held-out protocol (docs/evaluation.md, "Protocol"); STARmap's
-- sections are five z-ranges of its one 3-D slice.
if split ~= "" then
    budget[#budget + 1] = "data.split=" .. split
    if split == "sections" and data == "starmap" then budget[#budget + 1] = "data.sections_from_z=5" end
end
-- The recipe the shipped configs had before issue 23: patches, no prior.
local recipes = {previous = {"model.prior=none", "data.train_sets=patches"}}
if recipe ~= "" then
    assert(recipes[recipe], "ALPHAST_RECIPE: unknown recipe '" .. recipe .. "' (previous)")
    for _, o in ipairs(recipes[recipe]) do budget[#budget + 1] = o end
end

local gated = {"attention=gated", "attention.gate_type=headwise", "attention.use_qk_norm=true"}
local moe = {"ffn=moe", "ffn.num_experts=4", "ffn.top_k=2"}

local with_prior = (os.getenv("ALPHAST_PRIOR") or "") ~= ""

local function join(...)
    local out = {}
    for _, list in ipairs{...} do
        for _, item in ipairs(list) do out[#out + 1] = item end
    end
    return out
end

local configs = {
    Baseline = {"attention=linear", "ffn=dense"},
    Gated = join(gated, {"ffn=dense"}),
    MoE = join({"attention=linear"}, moe),
    ["Gated+MoE"] = join(gated, moe),
    Geodesic = {"attention=geodesic", "ffn=dense"},
}
if screen then -- the Baseline model under each candidate recipe
    local base = {"attention=linear", "ffn=dense"}
    configs = {
        Baseline = join(base, {"model.prior=none", "data.train_sets=patches"}),
        ["Prior-base"] = join(base, {"model.prior=isomap", "model.prior_inputs=false", "data.train_sets=patches"}),
        Whole = join(base, {"model.prior=none", "data.train_sets=slices"}),
        Sampled = join(base, {"model.prior=none", "data.train_sets=patches", "training.select_on=sampled"}),
    }
elseif with_prior then
    local base = {"attention=linear", "ffn=dense", "model.prior=isomap"}
    configs["Prior-in"] = join(base, {"model.prior_residual=false"})
    configs["Prior-base"] = join(base, {"model.prior_inputs=false"})
    configs["Prior-both"] = base
end

-- ALPHAST_ONLY=Gated,MoE keeps those configs (the device matrix reuses runs).
local only = os.getenv("ALPHAST_ONLY")
if only and only ~= "" then
    local keep = {}
    for name in only:gmatch("[^,]+") do
        assert(configs[name], "ALPHAST_ONLY: no config '" .. name .. "'")
        keep[name] = configs[name]
    end
    configs = keep
end

a.sweep{
    name = (quick and "ablation-quick" or "ablation") .. (data == "visium" and "" or "-" .. data)
        .. (split == "" and "" or "-" .. split) .. (recipe == "" and "" or "-" .. recipe)
        .. (screen and "-screen" or with_prior and "-prior" or ""),
    base = a.override(data .. ".yaml", budget),  -- next to this script, else the shipped configs/
    configs = configs,
    seeds = {1, 2, 3},
    -- One run keeps a GPU ~8 % busy (its step waits on the host's prior and
    -- validation): all 15 share one, one BLAS thread each, side by side
    -- under the sweep's CUDA MPS daemon: 19.6-23.2 s on an H200 and its 16
    -- cores (without MPS they take the GPU in turns: 32.1-32.7 s; 8 at a time
    -- with 2 threads 23.9 s with MPS) (docs/gpu.md, "Sweeps on GPUs").
    jobs = device == "cuda" and 16 or 2,
    threads = device == "cuda" and 1 or nil,
    executor = device == "cuda" and {runs_per_gpu = 16} or nil,
    report = true,
}
