-- The tiny model, two configs by two seeds, with its Slurm options in the
-- script (tests/test_slurm.c, tests/test_slurm.sh: `--executor local` runs
-- it here instead) and a report when the last run ends.
local a = require "alphast"
a.sweep{
  name = "slurm",
  base = a.config("tiny.yaml"),
  configs = {Baseline = {}, Gated = {attention = "gated"}},
  seeds = {1, 2},
  executor = {kind = "slurm", partition = "debug", time = "0:10:00", mem = "1G", cpus_per_task = 1,
              sbatch = {"--comment=from-the-script", "--ntasks=1"}},
  report = true,
}
