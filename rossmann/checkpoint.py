"""Per-epoch Keras training checkpoints: rank 0 writes them, a restarted run resumes after the last finished epoch.

Under the checkpoint directory's `current/` (see `rossmann.train_state`): `last` (TensorFlow checkpoint of the model
and its optimizer), `best.npz` (weights of the best epoch so far) and `state.json` (TrainState).
"""
from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import tensorflow as tf

from rossmann.train_state import CURRENT, TrainState, copy_checkpoint, read_state, reading, replace_current, resume

__all__ = ["CURRENT", "EpochCheckpoint", "KeepBest", "TrainState", "copy_checkpoint", "read_checkpoint", "read_state",
           "restore", "resume"]

log = logging.getLogger(__name__)


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

        current = self.directory / CURRENT

        def write_files(folder: Path) -> None:
            self.model.save_weights(str(folder / "last"))
            if self.keep_best.epoch == epoch or not (current / "best.npz").exists():
                np.savez(folder / "best.npz", *(self.keep_best.weights or self.model.get_weights()))
            else:
                shutil.copy2(current / "best.npz", folder / "best.npz")

        replace_current(self.directory, self.state, write_files)
        if self.saved is not None:
            self.saved(self.directory)  # e.g. upload it to the task's Flyte checkpoint


def read_checkpoint(current: Path) -> list[np.ndarray]:
    """Read the files of the checkpoint folder ``current`` whole, loading nothing into a model (CheckpointError naming
    one that cannot be read; see ``train_state.resume``); return the best epoch's weights."""
    with reading(current / "last.index"):
        reader = tf.train.load_checkpoint(str(current / "last"))
    with reading(next(current.glob("last.data-*"), current / "last.data")):
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    with reading(current / "best.npz"), np.load(current / "best.npz") as best:
        return [best[f"arr_{i}"] for i in range(len(best.files))]


def restore(model: tf.keras.Model, directory: str | os.PathLike) -> None:
    """Load the last epoch's model and optimizer state into model (a checkpoint ``read_checkpoint`` read whole)."""
    model.load_weights(str(Path(directory) / CURRENT / "last")).expect_partial()  # uncompiled: no optimizer to restore
