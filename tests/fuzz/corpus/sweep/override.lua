-- Overrides from Lua values (numbers, booleans, tables) and Hydra strings,
-- applied in order on config objects.
local a = require "alphast"
local base = a.config("tiny.yaml")
local moe = a.override(base, {ffn = {name = "moe", num_experts = 4, top_k = 2}, ["training.learning_rate"] = 2.5e-4})
local both = moe:override{"attention=gated", "ffn.num_experts=8", ["loss.use_distance_matrix"] = false}
a.sweep{
  name = "override",
  configs = {Moe = moe, Both = both, Base = base},
}
