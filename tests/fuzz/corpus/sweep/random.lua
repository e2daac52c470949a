-- The same seed draws the same points; another seed other points.
local a = require "alphast"
local function draw(seed)
  local points = a.random{
    n = 4, seed = seed,
    ["training.learning_rate"] = a.log_uniform(1e-4, 1e-2),
    ["data.loading.expression_dropout"] = a.uniform(0, 0.5),
    ["training.batch_size"] = a.int(1, 8),
    attention = {"linear", "gated"},
  }
  for _, p in ipairs(points) do p.name = "s" .. seed .. ":" .. p.name end
  return points
end
local configs = draw(1)
for _, p in ipairs(draw(2)) do configs[#configs + 1] = p end
a.sweep{name = "random", base = "tiny.yaml", configs = configs}
