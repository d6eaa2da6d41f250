#!/usr/bin/env bash
# Rewrites constraints.txt from the current .venv (run after a deliberate dependency change, then commit it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
{
    head -2 "$ROOT/constraints.txt"
    echo "tensorflow==2.15.1"
    "$ROOT/.venv/bin/pip" freeze --exclude-editable --disable-pip-version-check \
        | grep -v -E "^(-e |flytekitplugins-horovod)" | sed 's|^horovod @ .*|horovod==0.28.1|'
} > "$ROOT/constraints.txt.new"
mv "$ROOT/constraints.txt.new" "$ROOT/constraints.txt"
