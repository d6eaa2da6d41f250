"""Per-epoch checkpoints, framework-free: the training state, the ``current/`` folder replaced whole after every
epoch, and copying it to a task's Flyte checkpoint. ``rossmann.checkpoint`` (Keras) and ``rossmann.torch_model``
(PyTorch) write their own weight files into it.

Layout under a checkpoint directory: ``current/`` holding ``state.json`` (TrainState) and the framework's files. A
crash mid-write leaves the previous epoch's ``current/``.
"""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

CURRENT = "current"
STATE = "state.json"


@dataclass
class TrainState:
    """Progress so far: epochs finished, their history, and the best monitored value (epoch 0-based)."""

    epochs_done: int = 0
    history: dict[str, list[float]] = field(default_factory=dict)
    best: float = math.inf
    best_epoch: int = -1


def read_state(directory: str | os.PathLike) -> TrainState | None:
    """The state of the checkpoint in directory, or None if there is none."""
    path = Path(directory) / CURRENT / STATE
    return TrainState(**json.loads(path.read_text())) if path.is_file() else None


def replace_current(directory: str | os.PathLike, state: TrainState, write_files: Callable[[Path], None]) -> Path:
    """Make a new ``current/`` in ``directory``: ``write_files(folder)`` fills a fresh folder, ``state.json`` is added,
    and the folder replaces the old ``current/`` by renames only; return it."""
    directory = Path(directory)
    current, tmp = directory / CURRENT, directory / f".tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    write_files(tmp)
    (tmp / STATE).write_text(json.dumps(asdict(state)))
    old = directory / f".old-{uuid.uuid4().hex[:8]}"
    if current.exists():
        os.replace(current, old)
    os.replace(tmp, current)
    shutil.rmtree(old, ignore_errors=True)
    log.info("checkpoint of epoch %d in %s", state.epochs_done, current)
    return current


def copy_checkpoint(directory: str | os.PathLike, url: str) -> None:
    """Copy the checkpoint in ``directory`` (its ``current/``) to ``url`` (a local path or an fsspec URL: a task's
    Flyte checkpoint, for processes that save it without flytekit, such as Spark executors), replacing the last."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    target = f"{root.rstrip('/')}/{CURRENT}"
    if fs.exists(target):
        fs.rm(target, recursive=True)
    fs.put(str(Path(directory) / CURRENT), target, recursive=True)
