-- Four quick runs for two runners at once.
local a = require "alphast"
a.sweep{name = "race", base = "tiny.yaml", configs = a.grid{attention = {"linear", "gated"}, ["seed"] = {1, 2}}}
