-- Appends a line each time it is evaluated (reproducer lua/l20; needs --trust-script).
local a = require "alphast"
local f = io.open(os.getenv("ALPHAST_TEST_SCRATCH") .. "/evaluations.txt", "a"); f:write("evaluated\n"); f:close()
a.sweep{name = "count_evals", base = a.config("tiny.yaml"), configs = {A = {}, B = {"training.epochs=1"}},
        seeds = {1, 2}, schedule = {lr = function(step, epoch) return 1e-3 end}}
