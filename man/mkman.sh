#!/bin/sh
# Writes one man page with help2man from alphast-run's own help (man/man.mk):
# man/alphast-run.1 from `alphast-run --help`, man/alphast-run-COMMAND.1 from
# `alphast-run COMMAND --help` (pages named as git names its commands' pages).
# The main page also checks that every command of --help has a page in PAGES.
#
# usage: mkman.sh HELP2MAN PROGRAM VERSION OUT PAGES...
set -eu
help2man=$1 prog=$2 version=$3 out=$4
shift 4
fail() { echo "mkman.sh: $*" >&2; exit 1; }
page=$(basename "$out" .1)
cmd=${page#alphast-run}
cmd=${cmd#-}
# "  train        train a model on a dataset (...)" lines of the Commands: section
commands=$("$prog" --help | awk '/^Commands:/ { on = 1; next } on && !NF { exit } on && /^  [a-z]/ { print }')
[ -n "$commands" ] || fail "no Commands: section in '$prog --help'"

inc=$out.h2m
if [ -z "$cmd" ]; then
  help="--help"
  name="train and compare AlphaSTomics diffusion transformers for spatial transcriptomics"
  printf '[SEE ALSO]\n' >"$inc"
  for c in $(printf '%s\n' "$commands" | awk '{ print $1 }'); do
    case " $* " in
      *" man/alphast-run-$c.1 "*) ;;
      *) fail "the command '$c' has no man page: add man/alphast-run-$c.1 to dist_man_MANS in man/man.mk" ;;
    esac
    printf '.BR alphast-run-%s (1),\n' "$c" >>"$inc"
  done
else
  help="$cmd --help"
  name=$(printf '%s\n' "$commands" | awk -v c="$cmd" '$1 == c { sub(/^ +[^ ]+ +/, ""); print }')
  [ -n "$name" ] || fail "'$cmd' is not a command of '$prog --help'"
  printf '[SEE ALSO]\n.BR alphast-run (1),\n' >"$inc"
fi
cat >>"$inc" <<'EOF'
and the guides in the docs/ folder of the alphast sources, installed as
.IR share/doc/alphast/docs/ .
EOF

# help2man reads each usage ("Usage: ..." and "   or: ...") as one line: it
# runs the program through this wrapper, which joins a usage wrapped onto
# further indented lines.
wrap=$out.prog
cat >"$wrap" <<EOF
#!/bin/sh
"$prog" "\$@" | awk '!done && !NF { if (usage != "") print usage; usage = ""; done = 1 }
  done { print; next }
  /^Usage:|^ +or:/ { if (usage != "") print usage; usage = \$0; next }
  usage != "" && /^[ \t]+[^ \t]/ { sub(/^[ \t]+/, " "); usage = usage \$0; next }
  { if (usage != "") print usage; usage = ""; print }
  END { if (usage != "") print usage }'
EOF
chmod +x "$wrap"

# C.UTF-8: the help's few non-ASCII characters (±) stay as they are.
"$help2man" --locale=C.UTF-8 --no-info --no-discard-stderr --version-string="$page (alphast) $version" \
  --help-option="$help" --name="$name" --include="$inc" --output="$out.tmp" "$wrap"
rm -f "$inc" "$wrap"
mv "$out.tmp" "$out"
