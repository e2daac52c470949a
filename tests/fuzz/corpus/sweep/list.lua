-- Points in the order given; names given, or made from the overrides.
local a = require "alphast"
a.sweep{
  base = "tiny.yaml",
  configs = a.list{
    {name = "wide", ["TransformerLayer_setting.dim_ff_expression"] = 16},
    "attention=gated",
    {},
    {seed = 99, ["loss.use_distance_matrix"] = false},
  },
  seeds = {3, 4},
}
