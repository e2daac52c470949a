-- Two runs of the tiny model long enough (1,500 steps, a few seconds) to be
-- preempted mid-epoch by tests/test_slurm.sh.
local a = require "alphast"
a.sweep{
  name = "preempt",
  base = a.config("tiny.yaml"):override{"training.epochs=3", "training.steps_per_epoch=500"},
  configs = {Baseline = {}, Gated = {attention = "gated"}},
}
