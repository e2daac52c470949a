-- The four-config study on the tiny model, two seeds each.
local a = require "alphast"
local base = a.config("tiny.yaml")

a.sweep{
  name = "ablation",
  base = base,
  configs = {
    Baseline = {},
    Gated = {attention = "gated"},
    MoE = {ffn = {name = "moe", num_experts = 2, top_k = 1}},
    Both = {"attention=gated", "ffn={name: moe, num_experts: 2, top_k: 1}"},
  },
  seeds = {1, 2},
}
