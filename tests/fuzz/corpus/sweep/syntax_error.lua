local a = require "alphast"
a.sweep{base = "tiny.yaml",
  configs = {A = {}}
