#!/usr/bin/env bash
# Runs every benchmark in sequence with the project's virtual environment and fails if any fails.
#   bash bench/run_all.sh            # the full runs (docs/performance.md), about 80 minutes on 2 cores
#   bash bench/run_all.sh --quick    # a fast sanity run of every script
# Each script prints its tables and RATIO lines and writes .cache/bench/results/<name>.json.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-$ROOT/.venv/bin/python}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
start=$(date +%s)
for bench in launch prep predict train_scale floor recipe phases steps full_size growth reference vs_ddp horovod_knobs step_exchange vs_mwms driver_start first_epoch rank_gc; do
    echo "### bench/$bench.py $* ($(date +%H:%M:%S), load average $(cut -d' ' -f1 /proc/loadavg))"
    "$PY" -m "bench.$bench" "$@"
done
echo "### all benchmarks passed in $(( $(date +%s) - start )) s"
