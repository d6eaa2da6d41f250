"""MPI-route test workflows, loaded by path with ``pyflyte run`` (so ranks must unpickle functions from a script)."""

import os
import typing

import flytekit
from flytekit import task, workflow

from flytekitplugins.horovod import Horovod, MPIJob, Worker

World = typing.NamedTuple("World", [("total", float), ("size", int), ("execution", str)])


def _allreduce_of_rank_plus_one() -> World:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    total = hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum)
    print(f"rank {hvd.rank()} of {hvd.size()}: allreduce -> {float(total)}")
    return World(float(total.numpy()), hvd.size(), flytekit.current_context().execution_id.name)


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def allreduce_two_workers() -> World:
    return _allreduce_of_rank_plus_one()


@task(task_config=MPIJob(worker=Worker(replicas=1), slots=2))
def allreduce_two_slots() -> World:
    return _allreduce_of_rank_plus_one()


@workflow
def two_workers_wf() -> World:
    return allreduce_two_workers()


@workflow
def two_slots_wf() -> World:
    return allreduce_two_slots()


# The timeline and autotune log paths are part of the task's static config; the test chooses them through these.
TIMELINE = os.environ.get("TEST_HOROVOD_TIMELINE") or None
AUTOTUNE_LOG = os.environ.get("TEST_HOROVOD_AUTOTUNE_LOG") or None


@task(
    task_config=MPIJob(
        worker=Worker(replicas=2),
        horovod=Horovod(fusion_threshold_mb=32, cycle_time_ms=2.5, timeline_filename=TIMELINE,
                        autotune=AUTOTUNE_LOG is not None, autotune_log_file=AUTOTUNE_LOG),
    ),
    enable_deck=True,
)
def settings_seen() -> typing.List[str]:
    """Each rank's view of the Horovod variables, its compute threads and its garbage collection, gathered on
    rank 0."""
    import gc

    import horovod.tensorflow as hvd
    import tensorflow as tf

    print(f"rank {hvd.rank()} says hello", flush=True)  # rank 0's line on the console, every rank's in the log
    for _ in range(20):
        hvd.allreduce(tf.constant(1.0))  # something for the timeline and autotune to record
    keys = ("HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME", "HOROVOD_TIMELINE", "OMP_NUM_THREADS",
            "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
    mine = f"rank={hvd.rank()}," + ",".join(f"{k}={os.environ.get(k)}" for k in keys)
    return [str(x) for x in hvd.allgather_object(f"{mine},gc_threshold={gc.get_threshold()[0]}")]


@workflow
def settings_wf() -> typing.List[str]:
    return settings_seen()


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def rank_one_fails() -> int:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    if hvd.rank() == 1:
        raise ValueError("rank one cannot go on")
    hvd.allreduce(tf.constant(1.0))  # rank 0 waits here for a peer that is gone
    return hvd.rank()


@workflow
def failing_wf() -> int:
    return rank_one_fails()


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(fusion_threshold_mb=0, cache_capacity=0)))
def zero_settings_seen() -> typing.List[str]:
    """Each rank's HOROVOD_FUSION_THRESHOLD and HOROVOD_CACHE_CAPACITY: 0 disables them and must reach every rank."""
    import horovod.tensorflow as hvd

    mine = f"rank={hvd.rank()},{os.environ.get('HOROVOD_FUSION_THRESHOLD')},{os.environ.get('HOROVOD_CACHE_CAPACITY')}"
    return [str(x) for x in hvd.allgather_object(mine)]


@workflow
def zero_settings_wf() -> typing.List[str]:
    return zero_settings_seen()


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def sleeps(seconds: int) -> int:
    """Ranks that wait (for a Ctrl-C test): each says it started, then sleeps."""
    import time

    import horovod.tensorflow as hvd

    print(f"rank {hvd.rank()} is sleeping", flush=True)
    time.sleep(seconds)
    return hvd.rank()


@workflow
def sleeping_wf(seconds: int = 120) -> int:
    return sleeps(seconds=seconds)


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi")))
def sleeps_mpirun(seconds: int) -> int:
    """As ``sleeps``, with ranks started by mpirun."""
    import time

    import horovod.tensorflow as hvd

    print(f"rank {hvd.rank()} is sleeping", flush=True)
    time.sleep(seconds)
    return hvd.rank()


@workflow
def mpirun_sleeping_wf(seconds: int = 120) -> int:
    return sleeps_mpirun(seconds=seconds)


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi")))
def wedges_mpirun() -> float:
    """Ranks whose launcher is wedged for real: after an allreduce (both ranks past ``hvd.init()``), rank 0 stops its
    parent, mpirun (SIGSTOP), and both ranks return. mpirun never exits, and the ranks' ``hvd.shutdown`` (MPI_Finalize
    waits for mpirun) never ends."""
    import signal
    import time

    import horovod.tensorflow as hvd
    import tensorflow as tf

    total = float(hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum).numpy())
    if hvd.rank() == 0:
        with open(f"/proc/{os.getppid()}/comm") as f:
            parent = f.read().strip()
        assert parent == "mpirun", f"rank 0's parent is {parent!r}, not mpirun"
        with open(os.environ["TEST_WEDGE_STAMP"], "w") as f:  # when the ranks returned, for the test
            f.write(repr(time.time()))
        os.kill(os.getppid(), signal.SIGSTOP)
    return total


@workflow
def wedged_mpirun_wf() -> float:
    return wedges_mpirun()
