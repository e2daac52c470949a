-- A script that starts a process (reproducer lua/l04): refused unless trusted.
local a = require "alphast"
os.execute("touch " .. os.getenv("ALPHAST_TEST_SCRATCH") .. "/ran_a_process")
a.sweep{name = "restricted_os_execute", base = a.config("tiny.yaml")}
