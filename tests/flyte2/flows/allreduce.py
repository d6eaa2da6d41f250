"""Flyte 2 tasks for tests/flyte2: a two-rank allreduce (Gloo and mpirun), a rank that raises, ranks out of step, and
ranks that fail under retries (one the same way each attempt, one killed once, one resuming from its checkpoint)."""

import flyte

from flyteplugins.horovod import Horovod, HorovodJob, MPIJob, Worker

gloo = flyte.TaskEnvironment(name="hvd_gloo", plugin_config=MPIJob(worker=Worker(replicas=2)))
# ranks out of step fail after 8 s (Horovod's stall check warns after 2 s, a quarter of it)
stalls = flyte.TaskEnvironment(name="hvd_stall",
                               plugin_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(stall_timeout=8)))
# one worker pod of 2 slots: the backend's MPIJob gives it 1 slot (slotsPerWorker), the launcher restores 2
two_slots = flyte.TaskEnvironment(name="hvd_two_slots", plugin_config=MPIJob(worker=Worker(replicas=1), slots=2))
mpi = flyte.TaskEnvironment(name="hvd_mpi",
                            plugin_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi")))


def _allreduce(x: float) -> str:
    import horovod.torch as hvd
    import torch

    total = hvd.allreduce(torch.tensor([x * (hvd.rank() + 1)]), op=hvd.Sum).item()
    return f"rank {hvd.rank()} of {hvd.size()}: {total}"


@gloo.task
def allreduce(x: float) -> str:
    return _allreduce(x)


@mpi.task
def allreduce_mpi(x: float) -> str:
    return _allreduce(x)


@two_slots.task
def allreduce_two_slots(x: float) -> str:
    return _allreduce(x)


@gloo.task
async def allreduce_async(x: float) -> str:
    return _allreduce(x)


@gloo.task
def rank_1_raises(x: float) -> str:
    import horovod.torch as hvd

    if hvd.rank() == 1:
        raise ValueError(f"rank 1 refuses {x}")
    return "rank 0 never gets here alone"


@stalls.task
def rank_1_one_step_more(x: float) -> str:
    """Rank 1 allreduces one step more than rank 0, which moves on to its ``epoch_loss``: each waits for the other."""
    import horovod.torch as hvd
    import torch

    for step in range(2 + hvd.rank()):
        hvd.allreduce(torch.tensor([x]), name=f"step_{step}")
    return f"epoch_loss {hvd.allreduce(torch.tensor([x]), name='epoch_loss').item()}"


@gloo.task
def flytekit_loaded(x: float) -> str:
    """The allreduce, and whether this rank (rank 0) has any flytekit module loaded."""
    import sys

    loaded = sorted(name for name in sys.modules if name.split(".")[0] == "flytekit")
    return f"{_allreduce(x)}; flytekit in the rank: {' '.join(loaded) or 'none'}"


def _attempt(log: str) -> int:
    """This attempt's number (1, 2, ...), counted in the file ``log`` by rank 1."""
    with open(log, "a+") as attempts:
        attempts.write("attempt\n")
        attempts.seek(0)
        return len(attempts.readlines())


@gloo.task(retries=2)
def rank_1_raises_with_retries(log: str) -> str:
    """Rank 1 raises on every attempt: the same failure each time, which Flyte 2 must not retry."""
    import horovod.torch as hvd

    if hvd.rank() == 1:
        raise ValueError(f"rank 1 refuses on attempt {_attempt(log)}")
    return _allreduce(1.0)


@gloo.task(retries=1)
def rank_1_killed_on_the_first_attempt(log: str) -> str:
    """Rank 1 is killed (SIGKILL) on the first attempt only: a lost rank, which a retry mends."""
    import os
    import signal

    import horovod.torch as hvd

    if hvd.rank() == 1 and _attempt(log) == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return _allreduce(1.0)


@gloo.task(retries=1)
def resumes_from_rank_0s_checkpoint(log: str) -> str:
    """Rank 0 loads the task's checkpoint (``flyte.ctx().checkpoint``) and saves this attempt's number in it; rank 1
    is killed on the first attempt, after the save: the retry's rank 0 loads the first attempt's checkpoint."""
    import os
    import signal

    import horovod.torch as hvd
    import torch

    if hvd.rank() == 1:
        _attempt(log)
    hvd.allreduce(torch.tensor([0.0]), name="counted")  # rank 1 has counted this attempt in the log
    with open(log) as attempts:
        attempt = len(attempts.readlines())
    previous = None
    if hvd.rank() == 0:
        checkpoint = flyte.ctx().checkpoint
        restored = checkpoint.load_sync()
        previous = restored.read_text() if restored is not None else "nothing"
        checkpoint.save_sync(f"attempt {attempt}".encode())
    hvd.allreduce(torch.tensor([0.0]), name="saved")
    if hvd.rank() == 1 and attempt == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return f"{_allreduce(1.0)}; restored {previous}"


elastic = flyte.TaskEnvironment(name="hvd_elastic", plugin_config=HorovodJob(worker=Worker(replicas=2), min_workers=1))


@elastic.task
def elastic_steps(steps: int) -> str:
    """Horovod's elastic loop (``hvd.elastic.run``, a committed ``TorchState``) allreducing once a step."""
    import horovod.torch as hvd
    import torch

    state = hvd.elastic.TorchState(step=0, total=0.0)

    @hvd.elastic.run
    def train(state) -> str:
        while state.step < steps:
            state.total += hvd.allreduce(torch.tensor([1.0]), op=hvd.Sum).item()
            state.step += 1
            state.commit()
        return f"rank {hvd.rank()} of {hvd.size()}: {state.total}"

    return train(state)


@gloo.task(report=True)
def epochs_in_the_report(epochs: int, seconds: float, tag: str) -> str:
    """Rank 0 prints an epoch line every ``seconds`` (both ranks allreduce each epoch's loss), as a training loop does,
    with ``tag`` in it (a test finds its run's report by it)."""
    import time

    import horovod.torch as hvd
    import torch

    for epoch in range(1, epochs + 1):
        time.sleep(seconds)
        loss = hvd.allreduce(torch.tensor([1.0 / epoch])).item()
        if hvd.rank() == 0:
            print(f"epoch {epoch}/{epochs}: loss {loss:.4f} ({tag})", flush=True)
    return f"{epochs} epochs"
