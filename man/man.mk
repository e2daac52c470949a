# Man pages: alphast-run(1) and one page per command, alphast-run-COMMAND(1)
# (as git names its commands' pages), written by help2man from the program's
# own --help (man/mkman.sh), so they say what the program says. They ship in
# the tarball: building a release needs no help2man. Where configure found
# help2man they are remade whenever alphast-run is relinked; the main page
# fails the build if --help lists a command that has no page here.
dist_man_MANS = man/alphast-run.1 man/alphast-run-train.1 man/alphast-run-sweep.1 \
	man/alphast-run-eval.1 man/alphast-run-sample.1 man/alphast-run-predict.1 man/alphast-run-plugins.1 \
	man/alphast-run-params.1 man/alphast-run-forward.1 man/alphast-run-report.1
EXTRA_DIST += man/mkman.sh

if HAVE_HELP2MAN
MAN_DEPS = alphast-run$(EXEEXT) $(srcdir)/man/mkman.sh
endif
$(dist_man_MANS): $(MAN_DEPS)
	@test -n "$(HELP2MAN)" || { echo "$@ is made from alphast-run --help by help2man: apt-get install help2man, then run configure again" >&2; exit 1; }
	@$(MKDIR_P) man
	$(AM_V_GEN)$(SHELL) $(srcdir)/man/mkman.sh '$(HELP2MAN)' ./alphast-run$(EXEEXT) '$(PACKAGE_VERSION)' $@ $(dist_man_MANS)

# A build tree apart from the sources remakes the pages in its own man/;
# distclean removes those (never the shipped ones an in-tree build uses).
distclean-local: distclean-man-local
distclean-man-local:
	test "$(srcdir)" = . || rm -f $(dist_man_MANS)
.PHONY: distclean-man-local
