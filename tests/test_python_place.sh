#!/bin/sh
# The Python door's place (issue 24 item 7, python/alphast) with the real
# anndata: a tiny expr_to_pos run places cells of the bundled Visium data
# through `alphast-run predict` (tests/python_place.py). Skips (77) while
# this build has no predict, and without Debian's anndata and PyYAML for
# /usr/bin/python3.
set -eu
python=/usr/bin/python3
src=$(cd "$(dirname "$0")/.." && pwd)
run="${ALPHAST_BUILD_DIR:-$src/_build}/alphast-run"
"$run" predict --help >/dev/null 2>&1 || { echo "SKIP: $run has no predict command"; exit 77; }
"$python" -c 'import anndata, pandas, yaml' 2>/dev/null ||
    { echo "SKIP: $python cannot import anndata, pandas and yaml (apt-get install python3-anndata python3-yaml)"; exit 77; }
data="$src/data/visium_prostate/visium_prostate.h5ad"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/alphast-place.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$run" train -q --config "$src/tests/data/python_tiny.yaml" --out "$tmp/run" data.path="$data" >"$tmp/train.log" 2>&1 ||
    { cat "$tmp/train.log"; exit 1; }
PYTHONPATH="$src/python" "$python" "$src/tests/python_place.py" "$data" "$tmp/run" "$run"
