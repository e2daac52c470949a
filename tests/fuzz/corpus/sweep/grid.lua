-- Keyed and Hydra-style grids give the same cartesian product.
local a = require "alphast"
local keyed = a.grid{attention = {"linear", "gated"}, ["training.epochs"] = {1, 2, 3}, ffn = "dense"}
local hydra = a.grid{"attention=linear,gated", "ffn={name: moe, num_experts: 2},dense"}
local configs = {}
for _, p in ipairs(keyed) do configs[#configs + 1] = p end
for _, p in ipairs(hydra) do p.name = "hydra:" .. p.name; configs[#configs + 1] = p end
a.sweep{base = a.config("tiny.yaml"), configs = configs}
