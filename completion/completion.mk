# Bash completion of alphast-run: commands, each command's options and their
# values, config keys and their values after KEY=. completion/mkcompletion.sh
# writes it from the program as built (its --help and its plugins) and the
# config schema, so it cannot fall behind the CLI. Installed where
# bash-completion loads it from when `alphast-run` is first completed
# (configure: --with-bash-completion-dir).
bashcompletion_DATA = completion/alphast-run
CLEANFILES += completion/alphast-run
EXTRA_DIST += completion/mkcompletion.sh
completion/alphast-run: alphast-run$(EXEEXT) $(plugin_LTLIBRARIES) $(srcdir)/completion/mkcompletion.sh \
		$(top_srcdir)/core/config/config_schema.c
	@$(MKDIR_P) completion
	$(AM_V_GEN)$(SHELL) $(srcdir)/completion/mkcompletion.sh ./alphast-run$(EXEEXT) \
	  $(top_srcdir)/core/config/config_schema.c >$@.tmp && mv $@.tmp $@
