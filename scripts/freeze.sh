#!/usr/bin/env bash
# Rewrites a constraints file from the environment it describes (run after a deliberate dependency change, then commit):
#   bash scripts/freeze.sh                                                        # constraints.txt from .venv
#   bash scripts/freeze.sh .matrix/legacy/venv matrix/legacy-constraints.txt      # the legacy leg's
# The file's comment header (its first lines starting with #, "# python X.Y" among them) is kept. --all pins pip,
# setuptools and wheel too: Horovod is built --no-build-isolation, i.e. with these, here and in the image.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${1:-$ROOT/.venv}
FILE=${2:-$ROOT/constraints.txt}
{
    sed -n '/^#/!q; p' "$FILE"
    "$VENV/bin/pip" freeze --all --exclude-editable --disable-pip-version-check \
        | grep -v -E "^(-e |horovod-flyte-runtime|flytekitplugins-horovod|flyteplugins-horovod|rossmann-horovod-flyte)" \
        | sed -e 's|^horovod @ .*|horovod==0.28.1|' -e 's|^torch==\([0-9.]*\)+.*|torch==\1|'
} > "$FILE.new"
mv "$FILE.new" "$FILE"
