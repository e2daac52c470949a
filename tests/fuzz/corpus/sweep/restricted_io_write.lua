-- A script that writes a file and opens a pipe (reproducer lua/l05): refused unless trusted.
local a = require "alphast"
local f = io.open(os.getenv("ALPHAST_TEST_SCRATCH") .. "/victim.txt", "w"); f:write("overwritten\n"); f:close()
local p = io.popen("echo popen-works"); local out = p:read("*a"); p:close()
a.sweep{name = "restricted_io_write", base = a.config("tiny.yaml")}
