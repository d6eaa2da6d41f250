#!/usr/bin/env bash
# make test (docs/testing.md, "How the suite is split"): two pytest runs side by side. One runs the tests marked
# `serial` (fault, stall, multi-host and every test asserting how fast something happens) one at a time, and with
# them those marked `heavy` (long and CPU-bound, timing nothing), so that the two runs end about together; the other
# runs the rest. A timing test thus shares the machine with one other test, never with another timing test. Each run
# fails on a failed test and on collecting none (pytest's exit code 5); the serial run's output follows the other's.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
.venv/bin/python -m pytest -m "serial or heavy" -p no:cacheprovider "$@" > "$log" 2>&1 &
serial=$!
trap 'kill "$serial" 2>/dev/null; rm -f "$log"' EXIT
.venv/bin/python -m pytest -m "not serial and not heavy" "$@"
rest=$?
wait "$serial"
serial_code=$?
echo "======== the tests marked serial, run one at a time beside the others ========"
cat "$log"
echo "make test: the other tests exited $rest, the serial tests $serial_code"
[ "$rest" -eq 0 ] && [ "$serial_code" -eq 0 ]
