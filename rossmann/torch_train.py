"""Distributed training of the PyTorch Rossmann model: the body of one Horovod rank (``horovod.torch``), the twin of
``rossmann.train.train_rank`` (the same data sharding, schedule, epoch lines, best-epoch choice, calibration and model
directory, with ``model.pt`` in place of ``model/``).

Each rank reads every size-th row group of the training split, from the rank-th, and evaluates the whole backtest
split exactly (not as an average of batch RMSPEs). Rank 0 checkpoints every epoch (``rossmann.train_state``:
``last.pt`` holds the model and optimizer state, ``best.pt`` the best epoch's weights); a run that finds a checkpoint
goes on after its last epoch.
"""
from __future__ import annotations

import copy
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rossmann.hyperparameters import BATCH_SIZE, DROPOUT, EPOCHS, HIDDEN, LEARNING_RATE
from rossmann.metrics import SCORED_LOG_SALES, rmspe
from rossmann.model_dir import History, write_history_and_metrics
from rossmann.prepared import continuous_stats, count_rows, feature_cols, load_metadata, read_split
from rossmann.schedule import MONITOR, epoch_line, half_cosine
from rossmann.torch_model import (
    EPSILON,
    build_torch_model,
    calibrate_for_rmspe,
    fill_untrained_embeddings,
    predict_log_sales,
    save_torchscript,
    torch_inputs,
)
from rossmann.train_state import TrainState, reading, replace_current, resume

log = logging.getLogger(__name__)

def batch_exp_rmspe(log_pred: torch.Tensor, log_true: torch.Tensor) -> float:
    """RMSPE of a batch from log sales, rows with log sales <= SCORED_LOG_SALES ignored (the Keras metric's twin)."""
    scored = log_true > SCORED_LOG_SALES
    if not bool(scored.any()):
        return 0.0
    pct = (torch.exp(log_true[scored]) - torch.exp(log_pred[scored])) / torch.exp(log_true[scored])
    return float(torch.sqrt(torch.mean(pct ** 2)))


def _save_checkpoint(directory: Path, state: TrainState, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                     best: dict[str, torch.Tensor]) -> None:
    def write_files(folder: Path) -> None:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, folder / "last.pt")
        torch.save(best, folder / "best.pt")

    replace_current(directory, state, write_files)


def _read_checkpoint(current: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The files of the checkpoint folder ``current``, read whole (CheckpointError naming one that cannot be read):
    last.pt's model and optimizer state, best.pt's weights."""
    with reading(current / "last.pt"):
        last = torch.load(current / "last.pt", weights_only=True)
    with reading(current / "best.pt"):
        return last, torch.load(current / "best.pt", weights_only=True)


# train_rank's parameters on purpose (a twin): the same call trains either framework's model
def train_rank_torch(
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
    checkpoint_saved: Callable[[Path], None] | None = None,
) -> History:
    """Train as one Horovod rank (``horovod.torch``; initialised here unless it already is); rank 0 writes the model
    directory to out_dir. Returns the history (the previous attempt's epochs too).

    ``learning_rate`` is per rank (scaled by the number of ranks); ``compression`` a ``hvd.Compression``. With
    ``checkpoint_dir`` rank 0 checkpoints every epoch there and calls ``checkpoint_saved(checkpoint_dir)`` (to upload
    it, e.g. to Flyte's); a checkpoint found there makes training go on after its last epoch.
    """
    import horovod.torch as hvd

    start = time.time()
    if not hvd.is_initialized():
        hvd.init()
    rank, size = hvd.rank(), hvd.size()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // hvd.local_size()))  # the host's cores, shared by its ranks
    prepared = Path(prepared_dir)
    metadata = load_metadata(prepared)
    columns, label = feature_cols(metadata) + [metadata["label_col"]], metadata["label_col"]
    train = read_split(prepared / "train", columns, shard=(rank, size))
    val = read_split(prepared / "val", columns)
    train_rows = count_rows(prepared / "train")
    steps = math.ceil(train_rows / (batch_size * size))  # the same on every rank, so allreduces pair up
    log.info("rank %d/%d: %d of %d train rows, %d backtest rows, %d steps per epoch", rank, size, len(train),
             train_rows, len(val), steps)

    torch.manual_seed(seed)
    model = build_torch_model(metadata, continuous_stats(prepared, metadata), hidden, dropout, embedding_width)
    # wrapped before anything is loaded into it: DistributedOptimizer builds a new optimizer from the param groups and
    # keeps none of the wrapped one's state (Horovod's own resuming example, pytorch_imagenet_resnet50.py, wraps first)
    # groups=1: every gradient in one grouped allreduce once backward has made the last one, instead of one allreduce
    # per gradient fused by whichever background cycle they fall in; on 2 CPU ranks the step then trains at DDP's
    # speed (bench/horovod_knobs.py, docs/performance.md section 12)
    optimizer = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=learning_rate * size, eps=EPSILON),
                                         named_parameters=model.named_parameters(),
                                         compression=compression or hvd.Compression.none, groups=1)
    # rank 0 decides whether the checkpoint is usable, every rank follows: a fresh start when it is not
    resumed = resume(checkpoint_dir, _read_checkpoint) if rank == 0 else None
    # named: horovod.torch names a broadcast after the object's type by default (TrainState on rank 0, NoneType on the
    # others), and differently named collectives never meet
    state = hvd.broadcast_object(resumed and resumed[0], root_rank=0, name="train_state") or TrainState()
    best = copy.deepcopy(model.state_dict())
    if resumed:
        (last, best) = resumed[1]
        model.load_state_dict(last["model"])
        optimizer.load_state_dict(last["optimizer"])
        log.info("rank 0: resuming after epoch %d of %d", state.epochs_done, epochs)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    categorical, continuous = torch_inputs(train, metadata)
    target = torch.from_numpy(train[label].to_numpy(np.float32))
    val_log_sales = val[label].to_numpy(np.float64)
    history = {k: list(v) for k, v in state.history.items()}
    for epoch in range(state.epochs_done, epochs):
        began = time.time()
        # each rank and epoch its own shuffle and dropout, the same whether the run was resumed or not
        rng = np.random.default_rng([seed, rank, epoch])
        torch.manual_seed(int(rng.integers(2**62)))
        lr = learning_rate * size * half_cosine(epoch, epochs)
        for group in optimizer.param_groups:
            group["lr"] = lr
        model.train()
        order = np.concatenate([rng.permutation(len(train)) for _ in range(math.ceil(steps * batch_size / len(train)))])
        totals = np.zeros(2)
        for step in range(steps):
            rows = torch.from_numpy(order[step * batch_size:(step + 1) * batch_size])
            optimizer.zero_grad()
            predicted = model(categorical[rows], continuous[rows])
            loss = (predicted - target[rows]).abs().mean() + model.l2_penalty()
            loss.backward()
            optimizer.step()
            totals += (float(loss.detach()), batch_exp_rmspe(predicted.detach(), target[rows]))
        # every rank's average, as Horovod's MetricAverageCallback gives the Keras model
        loss_mean, rmspe_mean = hvd.allreduce(torch.tensor(totals / steps), name="epoch_metrics").tolist()
        val_pred = predict_log_sales(model, val, metadata)
        scored = val_log_sales > SCORED_LOG_SALES
        epoch_metrics = {"loss": loss_mean, "exp_rmspe": rmspe_mean,
                         "val_loss": float(np.abs(val_pred - val_log_sales).mean()),
                         MONITOR: rmspe(np.exp(val_log_sales[scored]), np.exp(val_pred[scored])), "lr": lr}
        for key, value in epoch_metrics.items():
            history.setdefault(key, []).append(float(value))
        if epoch_metrics[MONITOR] < state.best:
            state.best, state.best_epoch, best = epoch_metrics[MONITOR], epoch, copy.deepcopy(model.state_dict())
        state.epochs_done, state.history = epoch + 1, history
        if rank == 0:
            print(epoch_line(epoch + 1, epochs, loss_mean, epoch_metrics[MONITOR], time.time() - began), flush=True)
            if checkpoint_dir is not None:
                _save_checkpoint(Path(checkpoint_dir), state, model, optimizer, best)
                if checkpoint_saved is not None:
                    checkpoint_saved(Path(checkpoint_dir))
    if rank == 0:  # the best epoch, calibrated on rank 0's share of the training rows
        model.load_state_dict(best)
        log.info("restored the weights of epoch %d (%s=%.4f)", state.best_epoch + 1, MONITOR, state.best)
        log.info("untrained category values set to the mean embedding: %s", fill_untrained_embeddings(model, metadata))
        scale = calibrate_for_rmspe(model, train, metadata)
        backtest = rmspe(np.exp(val_log_sales), np.exp(predict_log_sales(model, val, metadata)))
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        save_torchscript(model, out_dir)
        write_history_and_metrics(out_dir, history, {
            "framework": "pytorch", "route": "horovod-ranks", "ranks": size, "train_rows": train_rows,
            "rmspe_scale": scale, "backtest_rows": len(val), "backtest_rmspe": backtest,
            "seconds": time.time() - start})
    return history
