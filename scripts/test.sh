#!/usr/bin/env bash
# The README's test command: installs the dependencies, builds from scratch,
# runs the whole Criterion suite, then again under AddressSanitizer + UBSan.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
status=0
run_suite() { # name build-dir coretype configure-args...
  local name=$1 dir=$2 coretype=$3
  shift 3
  rm -rf "$dir"
  BUILD_DIR=$dir "$top/scripts/build.sh" "$@"
  echo "alphast: running the $name suite (OPENBLAS_CORETYPE ${coretype:-unset})"
  if [ -n "$coretype" ]; then
    OPENBLAS_CORETYPE=$coretype make -C "$dir" -j"$(nproc)" check >"$dir/check.out" 2>&1 || status=1
  else
    env -u OPENBLAS_CORETYPE make -C "$dir" -j"$(nproc)" check >"$dir/check.out" 2>&1 || status=1
  fi
  "$top/scripts/test-summary.sh" "$name" "$dir"
}
# Once each way: OpenBLAS older than the CPU makes alphast-run run itself
# again with OPENBLAS_CORETYPE set when it is unset, and keeps a user's
# choice when it is set; no test may depend on which happened. The plain
# suite runs with it unset, the sanitizer suite with it set: to the user's
# value, else to the kernels alphast-run settles on by itself (its debug
# line names them), so both suites compute with the same kernels.
run_suite plain "$top/_build" ""
set_coretype=${OPENBLAS_CORETYPE:-$(env -u OPENBLAS_CORETYPE ALPHAST_LOG=debug "$top/_build/alphast-run" --version 2>&1 >/dev/null |
  sed -n 's/.*running again with OPENBLAS_CORETYPE=\([A-Za-z0-9]*\).*/\1/p; s/.* chose its \([A-Za-z0-9]*\) kernels, which suit.*/\1/p' | head -1)}
# The CUDA backend is compiled and its tests run (or report skipped without
# a GPU) in the plain suite; the sanitizer build leaves it out, as ASan does
# not see into device code and nvcc would only double the build time.
run_suite sanitizers "$top/_build-asan" "$set_coretype" --enable-sanitizers --without-cuda
exit $status
