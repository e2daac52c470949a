local a = require "alphast"
local base = a.config("tiny.yaml")
local function make()
  return a.override(base, {["training.learnig_rate"] = 1e-3})
end
a.sweep{base = make()}
