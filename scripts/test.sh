#!/usr/bin/env bash
# The README's test command: installs the dependencies, builds from scratch,
# runs the whole Criterion suite, then again under AddressSanitizer + UBSan.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
status=0
run_suite() { # name build-dir configure-args...
  local name=$1 dir=$2
  shift 2
  rm -rf "$dir"
  BUILD_DIR=$dir "$top/scripts/build.sh" "$@"
  echo "alphast: running the $name suite"
  make -C "$dir" -j"$(nproc)" check >"$dir/check.out" 2>&1 || status=1
  "$top/scripts/test-summary.sh" "$name" "$dir"
}
run_suite plain "$top/_build"
# The CUDA backend is compiled and its tests run (or report skipped without
# a GPU) in the plain suite; the sanitizer build leaves it out, as ASan does
# not see into device code and nvcc would only double the build time.
run_suite sanitizers "$top/_build-asan" --enable-sanitizers --without-cuda
exit $status
