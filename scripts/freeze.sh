#!/usr/bin/env bash
# Rewrites constraints.txt from the current .venv (run after a deliberate dependency change, then commit it).
# --all pins pip, setuptools and wheel too: Horovod is built --no-build-isolation, i.e. with these, here and in the image.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
{
    head -2 "$ROOT/constraints.txt"
    echo "tensorflow==2.15.1"
    "$ROOT/.venv/bin/pip" freeze --all --exclude-editable --disable-pip-version-check \
        | grep -v -E "^(-e |flytekitplugins-horovod|rossmann-horovod-flyte)" | sed -e 's|^horovod @ .*|horovod==0.28.1|' -e 's|^torch==\([0-9.]*\)+.*|torch==\1|'
} > "$ROOT/constraints.txt.new"
mv "$ROOT/constraints.txt.new" "$ROOT/constraints.txt"
