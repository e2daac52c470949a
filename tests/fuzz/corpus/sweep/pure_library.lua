-- What a restricted script keeps: the pure libraries, os.time/clock/date/getenv,
-- reading regular files, load of source text and require of files next to it.
local a = require "alphast"
local util = require "helpers.util"
local tiny = os.getenv("ALPHAST_TEST_DATA") .. "/sweeps/tiny.yaml" -- relative paths are the process's, as in Lua
local lines = 0
for _ in io.lines(tiny) do lines = lines + 1 end
local f = io.open(tiny); local text = f:read("a"); f:close()
assert(lines > 5 and text:find("training_mode"), "reads the config next to it")
assert(os.time() > 0 and os.clock() >= 0 and os.date("%Y") and (os.getenv("HOME") or true))
assert(load("return 6 * 7")() == 42 and math.max(1, 2) == 2 and utf8.char(72) == "H")
assert(table.concat({"a", "b"}, ",") == "a,b" and coroutine.wrap(function() return 1 end)() == 1)
assert(require("helpers.util") == util, "a module loads once")
a.sweep{name = "pure_library", base = a.config("tiny.yaml"),
        configs = {Scaled = {["training.epochs"] = util.double(1)}}}
