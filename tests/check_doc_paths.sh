#!/bin/sh
# Fails when docs/architecture.md's "To change X, edit Y" table names a
# path that does not exist, so the map cannot drift from the tree. Every
# `code span` with a slash in a row of that table is a path from the top
# of the source; <name> stands for any part of a file name (at least one
# file must match), and a trailing / names a folder.
src=${1:-${ALPHAST_SOURCE_DIR:-$(dirname "$0")/..}}
doc=$src/docs/architecture.md
rows=$(sed -n '/^## To change X, edit Y/,/^## /p' "$doc" | grep '^| ')
[ -n "$rows" ] || { echo "$doc: no \"To change X, edit Y\" table found"; exit 1; }
bad=0 n=0
for path in $(printf '%s\n' "$rows" | grep -o '`[^` ]*/[^` ]*`' | tr -d '`' | sort -u); do
    n=$((n + 1))
    glob=$(printf '%s' "$path" | sed 's/<[^>]*>/*/g')
    found=0
    for f in $src/$glob; do [ -e "$f" ] && found=1 && break; done
    [ $found = 1 ] && continue
    echo "$doc: the 'To change X, edit Y' table names $path, which is not in the tree: fix the row or the path"
    bad=1
done
[ $bad = 0 ] && echo "docs/architecture.md: the $n paths its 'To change X, edit Y' table names exist"
exit $bad
