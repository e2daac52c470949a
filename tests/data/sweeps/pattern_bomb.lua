-- One call of a library function that backtracks for hours: no instruction
-- count sees it, the wall-clock backstop ends the process.
local a = require "alphast"
string.find(string.rep("a", 20000), ".-.-.-b")
a.sweep{name = "pattern_bomb", base = a.config("tiny.yaml")}
