# sweep: Lua scripts (embedded Lua 5.4) that declare runs and schedules, and
# the ledger and claims that let runners share a sweep directory.
libalphast_la_SOURCES += core/sweep/sweep.h core/sweep/ledger.h core/sweep/sweep_internal.h \
	core/sweep/sweep_lua.c core/sweep/sweep_values.c core/sweep/sweep_points.c core/sweep/sweep_plan.c \
	core/sweep/sweep_schedule.c core/sweep/sweep_tabulate.c core/sweep/sweep_sandbox.c core/sweep/sweep_ledger.c core/sweep/sweep_claim.c \
	core/sweep/slurm.h core/sweep/sweep_slurm.c
EXTRA_DIST += core/sweep/README.md

check_PROGRAMS += tests/test_sweep
tests_test_sweep_SOURCES = tests/test_sweep.c tests/test_files.c tests/test_files.h
tests_test_sweep_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS)
tests_test_sweep_LDADD = $(TEST_LIBS) $(CJSON_LIBS)
EXTRA_DIST += docs/sweeps.md tests/data/sweeps/tiny.yaml tests/data/sweeps/ablation.lua \
	tests/data/sweeps/grid.lua tests/data/sweeps/list.lua tests/data/sweeps/random.lua \
	tests/data/sweeps/override.lua tests/data/sweeps/schedule.lua tests/data/sweeps/bad_schedule.lua \
	tests/data/sweeps/bad_key.lua tests/data/sweeps/syntax_error.lua tests/data/sweeps/runtime_error.lua \
	tests/data/sweeps/bad_field.lua tests/data/sweeps/fail.lua tests/data/sweeps/resume.lua tests/data/sweeps/race.lua \
	tests/data/sweeps/restricted_os_execute.lua tests/data/sweeps/restricted_io_write.lua \
	tests/data/sweeps/endless_loop.lua tests/data/sweeps/endless_pcall_loop.lua tests/data/sweeps/endless_schedule.lua \
	tests/data/sweeps/name_dotdot.lua tests/data/sweeps/count_evals.lua tests/data/sweeps/bad_utf8_key.lua \
	tests/data/sweeps/pattern_bomb.lua tests/data/sweeps/pure_library.lua tests/data/sweeps/helpers/util.lua \
	tests/data/sweeps/hydra.lua tests/data/sweeps/multirun.lua tests/data/sweeps/multirun_seeds.lua
