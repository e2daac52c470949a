local a = require "alphast"
local function seeds(t) return t.list end
a.sweep{base = "tiny.yaml", seeds = seeds(nil)}
