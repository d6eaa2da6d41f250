"""Per-epoch training checkpoints: rank 0 writes them, a restarted run resumes after the last finished epoch.

Layout under the checkpoint directory: `current/` holding `last` (TensorFlow checkpoint of the model and
its optimizer), `best.npz` (weights of the best epoch so far) and `state.json` (TrainState). `current/`
is replaced whole after every epoch, so a crash mid-write leaves the previous epoch's checkpoint.
"""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import tensorflow as tf

log = logging.getLogger(__name__)

CURRENT = "current"


@dataclass
class TrainState:
    """Progress so far: epochs finished, their history, and the best monitored value (epoch 0-based)."""

    epochs_done: int = 0
    history: dict[str, list[float]] = field(default_factory=dict)
    best: float = math.inf
    best_epoch: int = -1


class KeepBest(tf.keras.callbacks.Callback):
    """Restores, when training ends, the weights of the epoch with the lowest `monitor`.

    Under Horovod every rank sees the same (averaged) metric, so every rank picks the same epoch.
    """

    def __init__(self, monitor: str, state: TrainState | None = None, weights: list[np.ndarray] | None = None,
                 first_epoch: int = 0):
        super().__init__()
        state = state or TrainState()
        self.monitor, self.best, self.epoch, self.weights = monitor, state.best, state.best_epoch, weights
        self.first_epoch = first_epoch  # added to Keras's epoch numbers (a fit without initial_epoch)

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float] | None = None) -> None:
        value = (logs or {}).get(self.monitor)
        if value is not None and value < self.best:
            self.best, self.epoch, self.weights = float(value), self.first_epoch + epoch, self.model.get_weights()

    def on_train_end(self, logs: Mapping[str, float] | None = None) -> None:
        if self.weights is not None:
            log.info("restoring the weights of epoch %d (%s=%.4f)", self.epoch + 1, self.monitor, self.best)
            self.model.set_weights(self.weights)


class EpochCheckpoint(tf.keras.callbacks.Callback):
    """Writes a checkpoint after every epoch (put it after KeepBest, and use it on rank 0 only)."""

    def __init__(self, directory: str | os.PathLike, keep_best: KeepBest, state: TrainState,
                 saved: Callable[[Path], None] | None = None, first_epoch: int = 0):
        super().__init__()
        self.directory, self.keep_best, self.state, self.saved = Path(directory), keep_best, state, saved
        self.first_epoch = first_epoch  # added to Keras's epoch numbers (a fit without initial_epoch)

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float] | None = None) -> None:
        epoch += self.first_epoch
        for key, value in (logs or {}).items():
            self.state.history.setdefault(key, []).append(float(value))
        self.state.epochs_done = epoch + 1
        self.state.best, self.state.best_epoch = self.keep_best.best, self.keep_best.epoch

        current, tmp = self.directory / CURRENT, self.directory / f".tmp-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        self.model.save_weights(str(tmp / "last"))
        if self.keep_best.epoch == epoch or not (current / "best.npz").exists():
            np.savez(tmp / "best.npz", *(self.keep_best.weights or self.model.get_weights()))
        else:
            shutil.copy2(current / "best.npz", tmp / "best.npz")
        (tmp / "state.json").write_text(json.dumps(asdict(self.state)))
        old = self.directory / f".old-{uuid.uuid4().hex[:8]}"
        if current.exists():
            os.replace(current, old)
        os.replace(tmp, current)
        shutil.rmtree(old, ignore_errors=True)
        log.info("checkpoint of epoch %d in %s", epoch + 1, current)
        if self.saved is not None:
            self.saved(self.directory)  # e.g. upload it to the task's Flyte checkpoint


def read_state(directory: str | os.PathLike) -> TrainState | None:
    """The state of the checkpoint in directory, or None if there is none."""
    path = Path(directory) / CURRENT / "state.json"
    return TrainState(**json.loads(path.read_text())) if path.is_file() else None


def restore(model: tf.keras.Model, directory: str | os.PathLike) -> list[np.ndarray]:
    """Load the last epoch's model and optimizer state into model; return the best epoch's weights."""
    current = Path(directory) / CURRENT
    model.load_weights(str(current / "last")).expect_partial()  # an uncompiled model has no optimizer to restore
    with np.load(current / "best.npz") as best:
        return [best[f"arr_{i}"] for i in range(len(best.files))]


def copy_checkpoint(directory: str | os.PathLike, url: str) -> None:
    """Copy the checkpoint in ``directory`` (its ``current/``) to ``url`` (a local path or an fsspec URL: a task's
    Flyte checkpoint, for processes that save it without flytekit, such as Spark executors), replacing the last."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    target = f"{root.rstrip('/')}/{CURRENT}"
    if fs.exists(target):
        fs.rm(target, recursive=True)
    fs.put(str(Path(directory) / CURRENT), target, recursive=True)
