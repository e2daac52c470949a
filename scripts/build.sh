#!/usr/bin/env bash
# Configures and builds alphast in BUILD_DIR (default _build) from a clean
# checkout; extra arguments go to configure (e.g. --enable-sanitizers).
# Where MPI is installed (pkg-config mpi-c) the build has it, so that
# make check runs the MPI tests (--without-mpi after it turns it off).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/_build}
cd "$top"
if ! [ -x configure ] || [ configure.ac -nt configure ]; then
  # A fresh private log: a fixed name in a shared /tmp could be a link
  # another user planted, which root would then write through.
  log=$(mktemp "${TMPDIR:-/tmp}/alphast-autoreconf.XXXXXX")
  trap 'rm -f "$log"' EXIT
  autoreconf -fi >"$log" 2>&1 || { cat "$log"; exit 1; }
fi
mkdir -p "$build"
cd "$build"
mpi=()
if pkg-config --exists mpi-c 2>/dev/null; then mpi=(--with-mpi); fi
"$top/configure" -q "${mpi[@]}" "$@" 2>&1 | grep -v "cannot remove 'core'" || true
make -j"$(nproc)" >/dev/null
echo "alphast: built in $build"
