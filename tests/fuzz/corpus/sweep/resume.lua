-- Two quick runs and two long ones, two at a time.
local a = require "alphast"
a.sweep{
  name = "resume",
  base = a.config("tiny.yaml"),
  configs = {
    a_short = {},
    b_short = {attention = "gated"},
    c_long = {["training.epochs"] = 10},
    d_long = {["training.epochs"] = 10, attention = "gated"},
  },
  jobs = 2,
}
