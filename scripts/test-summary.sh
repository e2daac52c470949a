#!/usr/bin/env bash
# Sums the Criterion "Synthesis" lines of a build's test logs into one
# closing line, and shows the log of every test binary that failed.
# Script tests count by their automake result (PASS, SKIP).
set -euo pipefail
name=$1 dir=$2
passed=0 failed=0 skipped=0
for log in "$dir"/tests/*.log; do
  [ -e "$log" ] || continue
  line=$(grep -a "Synthesis:" "$log" | tail -n 1 || true)
  if [ -z "$line" ]; then
    # A script test (tests/check_layers.sh) has no synthesis: its automake result counts.
    if grep -qx ':test-result: PASS' "${log%.log}.trs" 2>/dev/null; then passed=$((passed + 1)); continue; fi
    # A script test that cannot run here (exit 77: tests/test_mpi_cuda.sh without a GPU) says why.
    if grep -qx ':test-result: SKIP' "${log%.log}.trs" 2>/dev/null; then
      echo "alphast: $(basename "$log" .log) skipped: $(grep -a -m 1 '^skipped:' "$log" | cut -c10-)"
      skipped=$((skipped + 1)); continue
    fi
    echo "alphast: $(basename "$log" .log) failed or printed no Criterion synthesis:"; tail -n 20 "$log"
    failed=$((failed + 1)); continue
  fi
  p=$(sed -E 's/.*Passing: ([0-9]+).*/\1/' <<<"$line")
  f=$(sed -E 's/.*Failing: ([0-9]+).*/\1/' <<<"$line")
  c=$(sed -E 's/.*Crashing: ([0-9]+).*/\1/' <<<"$line")
  passed=$((passed + p)); failed=$((failed + f + c))
  if ((f + c)); then echo "--- $(basename "$log")"; grep -a -E "\[FAIL\]|\[----\]|CRASH|Assertion" "$log" | head -n 40; fi
done
echo "$name: $passed passed, $failed failed$( ((skipped)) && echo ", $skipped skipped" )"
