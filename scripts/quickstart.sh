#!/usr/bin/env bash
# The README's main job: installs the dependencies, builds, and runs the
# four-config ablation on the bundled STARmap data; the report ends up in
# runs/ablation/report.html (and report.md). Extra arguments go to the sweep.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh"
cd "$top"
exec "$top/_build/alphast-run" sweep scripts/ablation.lua "$@"
