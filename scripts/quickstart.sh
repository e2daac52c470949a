#!/usr/bin/env bash
# The README's main job: installs the dependencies, builds, and runs the
# four-config ablation (and the geodesic attention) on the bundled Visium prostate data; the report ends up
# in sweeps/ablation/report.html (and report.md). Extra arguments go to the
# sweep. Works from a checkout and from an unpacked release tarball alike.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh"
cd "$top"
exec "$top/_build/alphast-run" sweep scripts/ablation.lua "$@"
