-- The first run cannot find its data; the others are fine.
local a = require "alphast"
a.sweep{
  name = "fail",
  base = "tiny.yaml",
  configs = {
    a_broken = {["data.path"] = "no_such_data.h5ad"},
    b_fine = {},
    c_fine = {attention = "gated"},
  },
}
