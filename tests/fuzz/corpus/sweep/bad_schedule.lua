-- A schedule that breaks in the middle of training.
local a = require "alphast"
a.sweep{
  name = "bad_schedule",
  base = "tiny.yaml",
  schedule = {lr = function(step) if step < 3 then return 1e-3 else return "fast" end end},
}
