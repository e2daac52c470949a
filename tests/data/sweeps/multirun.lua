-- The script `alphast-run sweep -m --config tiny.yaml attention=linear,gated
-- training.epochs=1,2` stands for: the same runs, ids and directory.
local a = require "alphast"
a.sweep{name = "tiny", base = a.config("tiny.yaml"), configs = a.grid{"attention=linear,gated", "training.epochs=1,2"}}
