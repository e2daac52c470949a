-- The script `alphast-run sweep -m --config tiny.yaml attention=linear,gated
-- seed=range(1,3)` stands for: its seeds are the sweep's seeds.
local a = require "alphast"
a.sweep{name = "tiny", base = a.config("tiny.yaml"), configs = a.grid{"attention=linear,gated"}, seeds = {1, 2}}
