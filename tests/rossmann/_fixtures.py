"""Checks shared by the Keras and the PyTorch training tests."""
from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.support.prepared import make_prepared

# make_prepared: tests/cluster and tests/multihost import it from here
__all__ = ["BROKEN_STATE", "check_broken_checkpoint_is_skipped", "make_prepared"]

# (file glob under current/, how it is broken, the problem the warning names), for both frameworks' checkpoints
BROKEN_STATE = ("state.json", "garbled", "JSONDecodeError")


def check_broken_checkpoint_is_skipped(checkpoint: Path, to: Path, file: str, how: str, problem: str,
                                       resume: Callable[[Path], object], caplog) -> None:
    """Break a copy of ``checkpoint`` (its ``current/<file>`` cut to half, or garbled); ``resume(copy)`` must give
    None and a warning naming the checkpoint, the file and the problem."""
    shutil.copytree(checkpoint, to)
    path = next((to / "current").glob(file))
    if how == "truncated":
        os.truncate(path, path.stat().st_size // 2)
    else:
        path.write_text('{"epochs_done": 2,')
    with caplog.at_level(logging.WARNING, logger="rossmann.train_state"):
        assert resume(to) is None
    assert f"the checkpoint {to / 'current'} cannot be read ({path}: {problem}" in caplog.text, caplog.text
