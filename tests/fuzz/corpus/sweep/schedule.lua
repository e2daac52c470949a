-- Schedules of (step, epoch): the trainer calls them before every step.
local a = require "alphast"
local peak = 2e-3
a.sweep{
  name = "schedule",
  base = a.config("tiny.yaml"):override{ffn = {name = "moe", num_experts = 2, top_k = 1}, ["training.epochs"] = 3},
  schedule = {
    lr = function(step, epoch) return peak / (1 + step) + 1e-5 * epoch end,
    mask_ratio = function(step, epoch) return 0.25 * epoch end,
    moe_weight = 0.125,
    router_noise = function(step) if step < 4 then return 0.5 else return 0 end end,
  },
}
