"""The Keras callbacks of the training routes besides the checkpoint's own (``rossmann.checkpoint``): the
learning-rate schedule with the epoch line, and the Estimator's model and per-epoch checkpoint saving."""
from __future__ import annotations

import functools
import math
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path

import tensorflow as tf

from rossmann.checkpoint import EpochCheckpoint, KeepBest, TrainState, copy_checkpoint
from rossmann.schedule import MONITOR, HalfCosine, epoch_line


class EpochLogger(tf.keras.callbacks.Callback):
    """Prints one line per epoch on rank 0: loss, backtest RMSPE and seconds (put it after Horovod's
    MetricAverageCallback, so that the numbers are every rank's average). ``first_epoch``: epochs a previous
    attempt finished, where Keras counts this fit's epochs from 0 (the Estimator has no ``initial_epoch``)."""

    def __init__(self, epochs: int, first_epoch: int = 0):
        super().__init__()
        self.epochs, self.first_epoch, self.started = epochs, first_epoch, 0.0

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, float] | None = None) -> None:
        self.started = time.time()

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float] | None = None) -> None:
        if _rank() == 0:
            logs = logs or {}
            print(epoch_line(self.first_epoch + epoch + 1, self.epochs, logs.get("loss", math.nan),
                             logs.get(MONITOR, math.nan), time.time() - self.started), flush=True)


def schedule_callbacks(learning_rate: float, ranks: int, epochs: int,
                       first_epoch: int = 0) -> list[tf.keras.callbacks.Callback]:
    """The per-epoch learning-rate schedule (of the rank-scaled rate) and the epoch log line; ``first_epoch`` for a
    fit that Keras numbers from 0 although it goes on after that many epochs."""
    from horovod.tensorflow.keras.callbacks import LearningRateScheduleCallback

    return [LearningRateScheduleCallback(initial_lr=learning_rate * ranks, multiplier=HalfCosine(epochs, first_epoch)),
            EpochLogger(epochs, first_epoch)]


class SaveWhenTrainingEnds(tf.keras.callbacks.ModelCheckpoint):
    """The Estimator's checkpoint callback (the model it returns): saved once, when training ends, so after KeepBest
    put back the best epoch's weights, which may be from a previous attempt (BestModelCheckpoint sees one fit); saved
    as HDF5 whatever the file's name."""

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float] | None = None) -> None:
        pass

    def on_train_end(self, logs: Mapping[str, float] | None = None) -> None:
        # HDF5, the format Horovod ships the model to the driver in (it loads this file and serializes it again): 0.2 s
        # to save and load this model, where a SavedModel (Keras's choice for a path without .h5) took 2.2 s
        with warnings.catch_warnings():  # Keras calls HDF5 legacy; Horovod's Estimator ships HDF5 all the same
            warnings.filterwarnings("ignore", "You are saving your model as an HDF5 file", UserWarning)
            self.model.save(self.filepath, overwrite=True, save_format="h5")


class PublishedCheckpoint(EpochCheckpoint):
    """The per-epoch checkpoint of an Estimator's ranks: written by rank 0 into a local folder of its own, then
    copied to ``url`` (the task's Flyte checkpoint, which these processes reach without flytekit)."""

    def __init__(self, url: str, keep_best: KeepBest, state: TrainState, first_epoch: int = 0,
                 scratch_dir: str | None = None):
        # chosen here, so the driver can remove it if rank 0 dies; made by rank 0's first save
        local = Path(scratch_dir or tempfile.gettempdir()).resolve() / f"rossmann-checkpoint-{uuid.uuid4().hex}"
        super().__init__(local, keep_best, state, functools.partial(copy_checkpoint, url=url), first_epoch)

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float] | None = None) -> None:
        if _rank() == 0:
            super().on_epoch_end(epoch, logs)

    def on_train_end(self, logs: Mapping[str, float] | None = None) -> None:
        if _rank() == 0:  # every rank has this path; another may end while rank 0 still saves its last epoch
            shutil.rmtree(self.directory, ignore_errors=True)  # its copy at the url is the checkpoint


def _rank() -> int:
    import horovod.tensorflow.keras as hvd

    return hvd.rank()
