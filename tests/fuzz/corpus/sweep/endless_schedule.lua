-- A schedule that never returns (reproducer lua/l14): each call has its own budget.
local a = require "alphast"
a.sweep{name = "endless_schedule", base = a.config("tiny.yaml"),
        schedule = {lr = function(step, epoch) while true do end end}}
