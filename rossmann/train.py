"""Distributed training of the Rossmann model, by two routes that write the same model directory.

- `fit_estimator`: Horovod's KerasEstimator on a Spark DataFrame (the Spark route).
- `train_rank`: the body of one Horovod rank, launched by mpirun / horovodrun / horovod.runner.run (the
  MPI route); each rank reads its own share of the training Parquet row groups.

Both validate on the prepared `val` split, the backtest (the last days of train.csv, featured as if the data
ended there), decay the learning rate along a half cosine, print one line per epoch from rank 0, keep
the weights of the epoch with the lowest backtest RMSPE, and scale the model's sales to the RMSPE optimum on
training rows (`rossmann.model.calibrate_for_rmspe`).

Both write the model directory of `rossmann.model_dir`; `rossmann.torch_train` is the PyTorch twin of `train_rank`.
"""
from __future__ import annotations

import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import tensorflow as tf

from rossmann.atomic import replaced_whole
from rossmann.batches import shuffled_batches
from rossmann.checkpoint import EpochCheckpoint, KeepBest, TrainState, read_checkpoint, restore, resume
from rossmann.hyperparameters import BATCH_SIZE, DROPOUT, EPOCHS, HIDDEN, LEARNING_RATE
from rossmann.keras_callbacks import PublishedCheckpoint, SaveWhenTrainingEnds, schedule_callbacks
from rossmann.metrics import rmspe
from rossmann.model import (
    CUSTOM_OBJECTS,
    LOSS,
    build_model,
    calibrate_for_rmspe,
    compile_model,
    exp_rmspe,
    fill_untrained_embeddings,
    make_optimizer,
)
from rossmann.model_dir import KERAS_MODEL, History, plain_history, write_history_and_metrics
from rossmann.predict import predict_log_sales
from rossmann.prepared import (
    Metadata,
    continuous_stats,
    count_rows,
    feature_cols,
    load_metadata,
    model_inputs,
    read_split,
)
from rossmann.schedule import MONITOR

log = logging.getLogger(__name__)

VAL_BATCH_SIZE = 8192


def save_training_outputs(
    model: tf.keras.Model,
    history: Mapping[str, Sequence[float]],
    out_dir: str | os.PathLike,
    extra_metrics: Mapping[str, Any],
) -> dict[str, Any]:
    """Write model/, history.json and metrics.json under out_dir (each replaced whole); return the metrics."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with replaced_whole(out / KERAS_MODEL) as tmp:
        model.save(str(tmp), save_format="tf", include_optimizer=False)  # no Horovod ops in the graph
    return write_history_and_metrics(out, history, {"framework": "keras", **extra_metrics})


def _finish(model: tf.keras.Model, history: History, metadata: Metadata, train: pd.DataFrame, val: pd.DataFrame,
            out_dir: str | os.PathLike | None, start: float, **metrics: Any) -> tf.keras.Model:
    """Both routes' last steps: category values no training row had get the mean embedding, the output is calibrated
    for RMSPE on `train`, and with out_dir the model directory is written, `metrics` with the calibration factor and
    the exact RMSPE of the whole backtest split `val` (the per-batch Keras metric is only an average)."""
    log.info("untrained category values set to the mean embedding: %s", fill_untrained_embeddings(model, metadata))
    model, scale = calibrate_for_rmspe(model, train, metadata)
    if out_dir is not None:
        backtest = rmspe(np.exp(val[metadata["label_col"]].to_numpy(np.float64)),
                         np.exp(predict_log_sales(model, val, metadata)))
        save_training_outputs(model, history, out_dir, {**metrics, "rmspe_scale": scale, "backtest_rows": len(val),
                                                        "backtest_rmspe": backtest, "seconds": time.time() - start})
    return model


def fit_estimator(
    prepared_dir: str | os.PathLike,
    backend: Any,
    store: Any,
    epochs: int = EPOCHS,
    batch_size: int = BATCH_SIZE,
    learning_rate: float = LEARNING_RATE,
    hidden: Sequence[int] = HIDDEN,
    dropout: float = DROPOUT,
    embedding_width: int = 10,
    seed: int = 0,
    compression: Any = None,
    out_dir: str | os.PathLike | None = None,
    verbose: int = 0,
    resume_dir: str | os.PathLike | None = None,
    checkpoint_url: str | None = None,
    scratch_dir: str | None = None,
) -> tuple[tf.keras.Model, History]:
    """Train with horovod.spark.keras.KerasEstimator on backend.num_processes() Spark tasks, on the prepared
    train and val Parquet as they are (copied into the store for ``fit_on_parquet``: no Spark job materialises them).

    `learning_rate` is per rank (the Estimator multiplies it by the number of ranks); `compression` is a
    horovod Compression; the ranks read their shares of the rows into memory (Horovod's ``InMemoryDataModule``). With
    out_dir, also writes the model directory there. With `checkpoint_url` (a local path or fsspec URL the ranks
    reach), rank 0 copies a checkpoint there after every epoch, kept first under `scratch_dir` (default: TMPDIR);
    a `resume_dir` holding such a checkpoint (a previous attempt's) makes training go on after its last epoch. Returns the trained Keras model and its
    history (all epochs, the previous attempt's too); the model is the epoch with the lowest val_exp_rmspe.
    """
    from horovod.spark.keras import KerasEstimator
    from horovod.spark.keras.datamodule import InMemoryDataModule

    from rossmann.estimator_data import splits_in_store

    start = time.time()
    prepared = Path(prepared_dir)
    metadata = load_metadata(prepared)
    features, label = feature_cols(metadata), metadata["label_col"]
    ranks = backend.num_processes()
    model = build_model(metadata, continuous_stats(prepared, metadata), hidden, dropout, embedding_width)
    state, best_weights = resume(resume_dir, read_checkpoint) or (TrainState(), None)
    done = min(state.epochs_done, epochs)
    optimizer = make_optimizer(learning_rate)
    if done:  # the weights and the optimizer's state (the Estimator keeps the variables of a built optimizer)
        compile_model(model, optimizer)
        optimizer.build(model.trainable_variables)
        restore(model, resume_dir)
        optimizer.learning_rate.assign(learning_rate)  # the saved one is already rank-scaled and decayed
        log.info("resuming after epoch %d of %d (optimizer step %d)", done, epochs, int(optimizer.iterations))
        print(f"resuming after epoch {done} of {epochs}", flush=True)
    history = {k: list(v) for k, v in state.history.items()}  # copied: the rank-0 checkpoint appends to state
    keep_best = KeepBest(MONITOR, state, best_weights, first_epoch=done)
    callbacks = [*schedule_callbacks(learning_rate, ranks, epochs, first_epoch=done), keep_best]
    published = None
    if checkpoint_url is not None:
        published = PublishedCheckpoint(checkpoint_url, keep_best, state, done, scratch_dir)
        callbacks.append(published)

    estimator = KerasEstimator(
        backend=backend,
        store=store,
        model=model,
        optimizer=optimizer,
        loss=LOSS,
        metrics=[exp_rmspe],
        custom_objects=CUSTOM_OBJECTS,
        feature_cols=features,
        label_cols=[label],
        validation="is_val",  # not a column: the val split is the store's; fit_on_parquet only asks that it is set
        batch_size=batch_size,
        val_batch_size=VAL_BATCH_SIZE,
        epochs=max(1, epochs - done),
        random_seed=seed + done,
        gradient_compression=compression,
        data_module=InMemoryDataModule,  # where petastorm imports too: it re-reads every row each epoch
        callbacks=callbacks,
        checkpoint_callback=SaveWhenTrainingEnds(""),  # after KeepBest restored the best epoch's weights
        verbose=verbose,
    )
    if done < epochs:
        log.info("fitting KerasEstimator: %d ranks, %d epochs, batch %d", ranks, epochs - done, batch_size)
        try:
            with splits_in_store(prepared, store) as dataset:
                keras_model = estimator.fit_on_parquet(dataset_idx=dataset)
        finally:  # a failed fit ends rank 0 before it removes its local checkpoint; here if rank 0 ran on this host
            if published is not None:
                shutil.rmtree(published.directory, ignore_errors=True)
        trained = keras_model.getModel()
        for key, values in plain_history(keras_model.getHistory()).items():
            history.setdefault(key, []).extend(values)
    else:  # the previous attempt finished every epoch: its best weights are the model
        model.set_weights(best_weights)
        trained = model
    train, val = (read_split(prepared / part, features + [label]) for part in ("train", "val"))
    trained = _finish(trained, history, metadata, train, val, out_dir, start,
                      route="spark-estimator", ranks=ranks, train_rows=len(train))
    return trained, history


def train_rank(
    prepared_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    epochs: int = EPOCHS,
    batch_size: int = BATCH_SIZE,
    learning_rate: float = LEARNING_RATE,
    seed: int = 0,
    hidden: Sequence[int] = HIDDEN,
    dropout: float = DROPOUT,
    embedding_width: int = 10,
    compression: Any = None,
    checkpoint_dir: str | os.PathLike | None = None,
    callbacks: Sequence[tf.keras.callbacks.Callback] = (),
    verbose: int = 0,
    checkpoint_saved: Callable[[Path], None] | None = None,
) -> History:
    """Train as one Horovod rank; rank 0 writes the model directory to out_dir. Returns the history.

    Each rank reads every size-th row group of the training split, from the rank-th, and evaluates the
    whole backtest split. `learning_rate` is per rank (scaled by the number of ranks here);
    `compression` is a horovod Compression (default none; hvd.Compression.fp16 halves allreduce bytes).
    With `checkpoint_dir`, rank 0 checkpoints every epoch there, and a run that finds a checkpoint
    resumes after its last epoch (only rank 0 needs to see the directory); `checkpoint_saved(checkpoint_dir)` is
    called on rank 0 after each epoch's checkpoint (to upload it, e.g. to Flyte's). The saved model is the epoch
    with the lowest val_exp_rmspe.
    """
    import horovod.tensorflow as hvd_tf
    import horovod.tensorflow.keras as hvd

    start = time.time()
    if not hvd.is_initialized():  # the plugin's rank has; a plain horovod.runner.run (as the tests use) has not
        hvd.init()
    rank, size = hvd.rank(), hvd.size()
    prepared = Path(prepared_dir)
    metadata = load_metadata(prepared)
    features, label = feature_cols(metadata), metadata["label_col"]

    train = read_split(prepared / "train", features + [label], shard=(rank, size))
    val = read_split(prepared / "val", features + [label])
    train_rows = count_rows(prepared / "train")
    steps = math.ceil(train_rows / (batch_size * size))  # the same on every rank, so allreduces pair up
    log.info("rank %d/%d: %d of %d train rows, %d backtest rows, %d steps per epoch", rank, size, len(train),
             train_rows, len(val), steps)

    tf.keras.utils.set_random_seed(seed)  # the same initial weights on every rank
    model = build_model(metadata, continuous_stats(prepared, metadata), hidden, dropout, embedding_width)
    optimizer = hvd.DistributedOptimizer(
        make_optimizer(learning_rate * size), compression=compression or hvd.Compression.none
    )
    compile_model(model, optimizer)

    # rank 0 decides whether the checkpoint is usable, every rank follows: a fresh start when it is not
    resumed = resume(checkpoint_dir, read_checkpoint) if rank == 0 else None
    state = hvd_tf.broadcast_object(resumed and resumed[0], root_rank=0) or TrainState()
    best_weights = None
    if state.epochs_done:
        if rank == 0:
            best_weights = resumed[1]
            restore(model, checkpoint_dir)
        hvd_tf.broadcast_variables(model.variables, root_rank=0)
        log.info("rank %d: resuming after epoch %d of %d", rank, state.epochs_done, epochs)
    keep_best = KeepBest(MONITOR, state, best_weights)
    rank_seed = seed + 1000 * rank + state.epochs_done
    tf.keras.utils.set_random_seed(rank_seed)  # each rank (and each resumption) its own shuffle and dropout

    train_data = shuffled_batches(model_inputs(train, metadata), train[label].to_numpy(np.float32), batch_size,
                                  seed=rank_seed)
    val_data = (model_inputs(val, metadata), val[label].to_numpy(np.float32))
    result = {k: list(v) for k, v in state.history.items()}  # copied: rank 0's checkpoint appends to state
    rank_callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),  # before any callback that reads the metrics
        *schedule_callbacks(learning_rate, size, epochs),
        keep_best,
    ]
    if checkpoint_dir is not None and rank == 0:
        rank_callbacks.append(EpochCheckpoint(checkpoint_dir, keep_best, state, checkpoint_saved))
    fitted = model.fit(
        train_data,
        steps_per_epoch=steps,
        epochs=epochs,
        initial_epoch=state.epochs_done,
        validation_data=val_data,
        validation_batch_size=VAL_BATCH_SIZE,
        callbacks=[*rank_callbacks, *callbacks],
        verbose=verbose if rank == 0 else 0,
    )
    for key, values in fitted.history.items():
        result.setdefault(key, []).extend(float(v) for v in values)
    if rank == 0:  # calibrated on rank 0's share of the training rows
        _finish(model, result, metadata, train, val, out_dir, start, route="horovod-ranks", ranks=size,
                train_rows=train_rows)
    return result
