#!/usr/bin/env bash
# make test (docs/testing.md, "How the suite is split"): two pytest runs side by side. One runs the tests marked
# `serial` (fault, stall, multi-host and every test asserting how fast something happens) one at a time, the other
# the rest; the tests marked `heavy` (long and CPU-bound, timing nothing) are shared: each run takes them after its
# own, from opposite ends, and each goes to the run that claims it first (tests/support/shared_heavy.py), so the two
# runs end about together on a fast machine and a slow one. A timing test thus shares the machine with one other
# test, never with another timing test. Each run fails on a failed test and on collecting none (pytest's exit code
# 5); the serial run's output follows the other's.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
export FLYTE_HOROVOD_TEST_SHARE
FLYTE_HOROVOD_TEST_SHARE=$(mktemp -d)
.venv/bin/python -m pytest -m "serial or heavy" -p no:cacheprovider "$@" > "$log" 2>&1 &
serial=$!
trap 'kill "$serial" 2>/dev/null; rm -rf "$log" "$FLYTE_HOROVOD_TEST_SHARE"' EXIT
FLYTE_HOROVOD_TEST_HEAVY_FROM_LAST=1 .venv/bin/python -m pytest -m "not serial" "$@"
rest=$?
wait "$serial"
serial_code=$?
echo "======== the tests marked serial, run one at a time beside the others ========"
cat "$log"
echo "make test: the other tests exited $rest, the serial tests $serial_code"
[ "$rest" -eq 0 ] && [ "$serial_code" -eq 0 ]
