-- A sweep named '..' would write its runs one directory up (reproducer lua/l19).
local a = require "alphast"
a.sweep{name = "..", base = a.config("tiny.yaml"), configs = {[".."] = {}, ["."] = {"training.epochs=1"}}}
