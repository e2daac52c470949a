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
# choice when it is set; no test may depend on which happened. The set
# value is the user's, else Haswell on any CPU with AVX2 + FMA (every x86
# machine CI runs on), else the suite runs unset twice.
set_coretype=${OPENBLAS_CORETYPE:-}
if [ -z "$set_coretype" ] && grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  set_coretype=Haswell
fi
run_suite plain "$top/_build" ""
# The CUDA backend is compiled and its tests run (or report skipped without
# a GPU) in the plain suite; the sanitizer build leaves it out, as ASan does
# not see into device code and nvcc would only double the build time.
run_suite sanitizers "$top/_build-asan" "$set_coretype" --enable-sanitizers --without-cuda
exit $status
