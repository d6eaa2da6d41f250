"""Per-epoch checkpoints, framework-free: the training state, the ``current/`` folder replaced whole after every
epoch, and copying it to a task's Flyte checkpoint. ``rossmann.checkpoint`` (Keras) and ``rossmann.torch_model``
(PyTorch) write their own weight files into it.

Layout under a checkpoint directory: ``current/`` holding ``state.json`` (TrainState) and the framework's files. A
process killed mid-write leaves the previous epoch's ``current/`` or, between the two renames, none (the next run
starts afresh): never a half-written one. A checkpoint that cannot be read all the same (a file truncated or damaged
elsewhere) is skipped by ``resume`` with a warning.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

from rossmann.atomic import replaced_whole

log = logging.getLogger(__name__)

CURRENT = "current"
STATE = "state.json"
T = TypeVar("T")


class CheckpointError(Exception):
    """A checkpoint file that cannot be read: names the file and the problem."""


@dataclass
class TrainState:
    """Progress so far: epochs finished, their history, and the best monitored value (epoch 0-based)."""

    epochs_done: int = 0
    history: dict[str, list[float]] = field(default_factory=dict)
    best: float = math.inf
    best_epoch: int = -1


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn any error raised while reading the checkpoint file ``path`` into a CheckpointError naming it."""
    try:
        yield
    except Exception as exc:
        raise CheckpointError(f"{path}: {type(exc).__name__}: {exc}") from exc


def read_state(directory: str | os.PathLike) -> TrainState | None:
    """The state of the checkpoint in directory, or None if there is none; CheckpointError if it cannot be read."""
    path = Path(directory) / CURRENT / STATE
    if not path.is_file():
        return None
    with reading(path):
        state = TrainState(**json.loads(path.read_text()))
        if not isinstance(state.epochs_done, int) or state.epochs_done < 0:
            raise ValueError(f"epochs_done={state.epochs_done!r}: must be a whole number >= 0")
        return state


def resume(directory: str | os.PathLike | None, read: Callable[[Path], T]) -> tuple[TrainState, T] | None:
    """The checkpoint in ``directory`` to go on from: its state and ``read(its current/ folder)``, which reads the
    framework's files whole (raising CheckpointError for one it cannot read) before anything is loaded into a model.
    None if there is none or it cannot be read: then a warning names the checkpoint, the file and the problem, and
    training starts afresh. The one place that decides whether a checkpoint is usable, for every framework."""
    if directory is None:
        return None
    try:
        state = read_state(directory)
        return (state, read(Path(directory) / CURRENT)) if state is not None and state.epochs_done else None
    except CheckpointError as exc:
        log.warning("the checkpoint %s cannot be read (%s); training starts afresh", Path(directory) / CURRENT, exc)
        return None


def replace_current(directory: str | os.PathLike, state: TrainState, write_files: Callable[[Path], None]) -> Path:
    """Make a new ``current/`` in ``directory``: ``write_files(folder)`` fills a fresh folder, ``state.json`` is added,
    and the folder replaces the old ``current/`` by renames only; return it."""
    current = Path(directory) / CURRENT
    with replaced_whole(current) as tmp:
        tmp.mkdir(parents=True)
        write_files(tmp)
        (tmp / STATE).write_text(json.dumps(asdict(state)))
    log.debug("checkpoint of epoch %d in %s", state.epochs_done, current)  # every epoch: the epoch line says enough
    return current


def copy_checkpoint(directory: str | os.PathLike, url: str) -> None:
    """Copy the checkpoint in ``directory`` (its ``current/``) to ``url`` (a local path or an fsspec URL: a task's
    Flyte checkpoint, for processes that save it without flytekit, such as Spark executors), replacing the last."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    source, target = Path(directory) / CURRENT, f"{root.rstrip('/')}/{CURRENT}"
    if fs.exists(target):
        fs.rm(target, recursive=True)
    fs.makedirs(target, exist_ok=True)
    # file by file (the frameworks write plain files), state.json last: a copy cut short has none, so read_state
    # finds no checkpoint there rather than a half-written one
    for path in sorted(source.iterdir(), key=lambda p: p.name == STATE):
        fs.put_file(str(path), f"{target}/{path.name}")
