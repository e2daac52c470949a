#!/bin/sh
# The Python door's read_run (issue 24 item 7, python/alphast) on a tiny run
# of the bundled Visium data, with Debian's anndata, pandas and PyYAML
# (tests/python_read_run.py). Skips (77) without them for /usr/bin/python3.
set -eu
python=/usr/bin/python3
"$python" -c 'import anndata, pandas, yaml' 2>/dev/null ||
    { echo "skipped: $python cannot import anndata, pandas and yaml (apt-get install python3-anndata python3-yaml)"; exit 77; }
src=$(cd "$(dirname "$0")/.." && pwd)
run="${ALPHAST_BUILD_DIR:-$src/_build}/alphast-run"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/alphast-python.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$run" train -q --config "$src/tests/data/python_tiny.yaml" --out "$tmp/run" data.path="$src/data/visium_prostate/visium_prostate.h5ad" \
    >"$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; exit 1; }
PYTHONPATH="$src/python" "$python" "$src/tests/python_read_run.py" "$tmp/run"
