#!/bin/sh
# Fails when a file (C or CUDA) includes a header from a layer above its own (the
# order is core/LAYERS, bottom up) or a plugin includes anything but the
# installed headers. Includes are written "layer/name.h" for that reason.
src=${1:-${ALPHAST_SOURCE_DIR:-$(dirname "$0")/..}}
layers=$(grep -v '^#' "$src/core/LAYERS")
rank() { i=0; for l in $layers; do [ "$l" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo -1; }
bad=0
check_dir() { # dir layer
    r=$(rank "$2")
    for f in $(find "$1" \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' \)); do
        grep -n '^#include "' "$f" | while IFS= read -r line; do
            hdr=$(printf '%s' "$line" | sed 's/.*#include "\([^"]*\)".*/\1/')
            case $hdr in
                alphast/*) continue ;;
                */*) ;;
                *) [ -f "$(dirname "$f")/$hdr" ] && continue
                   echo "$f:${line%%:*}: \"$hdr\" is not in this folder; write \"layer/$hdr\""; exit 1 ;;
            esac
            to=$(rank "${hdr%%/*}")
            if [ "$to" -lt 0 ]; then echo "$f:${line%%:*}: \"$hdr\": ${hdr%%/*} is not a layer in core/LAYERS"; exit 1; fi
            if [ "$to" -gt "$r" ]; then
                echo "$f:${line%%:*}: $2 includes \"$hdr\" from ${hdr%%/*}, a layer above it (core/LAYERS): move the code down or the include up"
                exit 1
            fi
        done || bad=1
    done
}
for l in $layers; do
    if [ "$l" = cli ]; then check_dir "$src/cli" cli; else check_dir "$src/core/$l" "$l"; fi
done
# Plugins see only the installed headers (and their own folder's).
for f in $(find "$src/plugins" "$src/examples" \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' \)); do
    grep -n '^#include "' "$f" | while IFS= read -r line; do
        hdr=$(printf '%s' "$line" | sed 's/.*#include "\([^"]*\)".*/\1/')
        case $hdr in alphast/*) continue ;; esac
        [ -f "$(dirname "$f")/$hdr" ] && continue
        echo "$f:${line%%:*}: a plugin may include only <alphast/...> and its own folder's headers, not \"$hdr\""
        exit 1
    done || bad=1
done
[ $bad = 0 ] && echo "layers: every include points down"
exit $bad
