-- A config key that is not UTF-8 (reproducer lua/l23): made the config dumper free twice.
local a = require "alphast"
a.sweep{name = "bad_utf8_key", base = a.config("tiny.yaml"), configs = {A = {["attention.x\147\160y"] = 1}}}
