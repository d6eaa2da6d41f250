"""One contestant of bench/vs_ddp.py in one process: the Rossmann PyTorch model (``rossmann.torch_model``) trained for
a fixed number of steps, the same model, data, batches, optimizer and learning-rate scaling whoever runs it:

* ``horovod``: ``horovod.torch.DistributedOptimizer`` (launched by ``horovodrun`` or as an ``MPIJob`` task's body);
* ``ddp``: ``torch.nn.parallel.DistributedDataParallel`` over the Gloo backend (launched by ``torchrun``);
* ``single``: one process, the global batch of both ranks, every core;
* where a step's time goes (bench/step_exchange.py): ``apart`` (2 ranks launched by ``torchrun``, each training on its
  part with no exchange at all: the compute of a step with the other rank beside it), ``gloo allreduce`` (under
  ``torchrun``: the gradients flattened into one buffer after ``backward``, one ``torch.distributed.all_reduce``, no
  DDP), ``horovod allreduce`` (under ``horovodrun``: the same buffer in one ``hvd.allreduce_``, no
  ``DistributedOptimizer`` and so none of its hooks) and ``horovod grouped allreduce`` (every gradient, not
  flattened, in one ``hvd.grouped_allreduce_`` after ``backward``: what ``DistributedOptimizer(groups=1)`` sends,
  without its hooks).

Global step ``s`` draws one global batch of ``batch x RANKS`` rows (the same rows for every contestant); rank ``r``
trains on its ``r``-th part, the single process on all of it, so all three compute the same gradients up to float
rounding and dropout's masks. The rate is Adam's ``learning_rate x RANKS`` (Horovod's and the project's scaling).

    python -m bench._ddp_body --mode single --prepared DIR --threads 2     # prints RESULT {json} on rank 0
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, Sequence

MODES = ["horovod", "ddp", "single", "apart", "gloo allreduce", "horovod allreduce", "horovod grouped allreduce"]
RANKS = 2  # the global batch is always RANKS parts, so a one-process run sees the same rows


def train(mode: str, prepared: str, hidden: Sequence[int], batch: int, steps: int, warmup: int,
          threads: int, groups: int = 0) -> Dict[str, Any]:
    """Train ``warmup + steps`` steps; rank 0's samples per second over the last ``steps`` (all ranks' samples) and
    the loss averaged over every rank and the last 20 steps."""
    import torch

    from rossmann.hyperparameters import DROPOUT, LEARNING_RATE
    from rossmann.prepared import continuous_stats, feature_cols, load_metadata, read_split
    from rossmann.torch_model import EPSILON, build_torch_model, torch_inputs

    torch.set_num_threads(threads)
    rank, size, average, exchange = _start(mode)
    metadata = load_metadata(prepared)
    label = metadata["label_col"]
    frame = read_split(Path(prepared) / "train", feature_cols(metadata) + [label])
    categorical, continuous = torch_inputs(frame, metadata)
    target = torch.from_numpy(frame[label].to_numpy(dtype="float32"))
    torch.manual_seed(0)  # the same initial weights in every contestant (DDP and Horovod broadcast rank 0's anyway)
    model = build_torch_model(metadata, continuous_stats(prepared, metadata), hidden, DROPOUT)
    net = model
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE * RANKS, eps=EPSILON)
    if mode == "horovod":
        import horovod.torch as hvd

        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                             groups=groups or None)
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        # no hvd.broadcast_optimizer_state: every rank's Adam state is empty, and on an empty state it takes one step
        # with zero gradients to create it, which moves Adam's bias correction by a step (a different trajectory
        # from DDP's and the single process's: 0.52 against 0.63 after 20 steps, measured)
    elif mode == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(model)
    torch.manual_seed(1 + rank)  # dropout's masks
    part = slice(rank * batch, (rank + 1) * batch) if size > 1 else slice(0, batch * RANKS)
    losses, started = [], None
    for step in range(warmup + steps):
        if step == warmup:
            started = time.perf_counter()
        rows = torch.from_numpy(_global_batch(step, len(target), batch * RANKS)[part])
        optimizer.zero_grad()
        loss = (net(categorical[rows], continuous[rows]) - target[rows]).abs().mean() + model.l2_penalty()
        loss.backward()
        if exchange:
            exchange([p.grad for p in model.parameters() if p.grad is not None])
        optimizer.step()
        losses.append(float(loss.detach()))
    seconds = time.perf_counter() - started
    final = average(sum(losses[-20:]) / 20)
    if mode in ("ddp", "apart", "gloo allreduce"):  # Gloo's threads stopped before exit: left to the interpreter's
        # exit, they abort the process
        torch.distributed.destroy_process_group()  # ("terminate called without an active exception", 1 run in 5)
    return {"mode": mode, "rank": rank, "ranks": size, "threads": threads, "groups": groups,
            "samples_per_s": steps * batch * RANKS / seconds,
            "seconds": seconds, "steps": steps, "final_loss": final, "first_loss": losses[0]}


def _global_batch(step: int, rows: int, count: int):
    import numpy as np

    return np.random.default_rng(step).integers(0, rows, count)


def _flattened(average_flat):
    """An exchange of the gradients in one collective, ``average_flat``, on one flat buffer (what ``apart`` leaves
    out), the averages copied back into the gradients."""
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    def exchange(grads) -> None:
        flat = _flatten_dense_tensors(grads)
        average_flat(flat)
        for grad, averaged in zip(grads, _unflatten_dense_tensors(flat, grads)):
            grad.copy_(averaged)

    return exchange


def _start(mode: str):
    """(rank, size, a function averaging a float over the ranks, and the in-place averaging of the list of gradients
    that the mode does by hand or None) of this process."""
    import torch

    if mode.startswith("horovod"):
        import horovod.torch as hvd

        if not hvd.is_initialized():  # an MPIJob task's rank has initialised it already
            hvd.init()
        exchange = {"horovod allreduce": _flattened(lambda flat: hvd.allreduce_(flat, op=hvd.Average,
                                                                                 name="flat_gradients")),
                    "horovod grouped allreduce": lambda grads: hvd.grouped_allreduce_(grads, op=hvd.Average,
                                                                                     name="gradients")}.get(mode)
        return hvd.rank(), hvd.size(), lambda value: float(hvd.allreduce(torch.tensor(value), name="final_loss")), \
            exchange
    if mode != "single":
        import torch.distributed as dist

        dist.init_process_group("gloo")
        size = dist.get_world_size()

        def average(value: float) -> float:
            tensor = torch.tensor(value)
            dist.all_reduce(tensor)
            return float(tensor) / size

        def average_flat(flat) -> None:
            dist.all_reduce(flat)
            flat.div_(size)

        return dist.get_rank(), size, average, _flattened(average_flat) if mode == "gloo allreduce" else None
    return 0, 1, lambda value: value, None


def main() -> None:
    from bench._body_cli import run

    run(__doc__.split("\n\n")[0], MODES, train)
    if "TORCHELASTIC_RUN_ID" in os.environ:  # a torchrun (DDP) rank, its result printed and its process group
        # destroyed: torch 2.15's Gloo threads still abort the interpreter's teardown now and then ("terminate called
        # without an active exception", SIGABRT, after destroy_process_group: the 4th of 4 DDP runs of one bench run
        # on 2026-11-28), so skip it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
