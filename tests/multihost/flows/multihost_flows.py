"""Tasks for the multi-host tests: serialized with ``pyflyte package``, run by the registered commands across hosts.

Every rank allreduces a large tensor (so its bytes show on the hosts' interfaces) and writes ``rank-<r>.json`` into
``marker_dir`` (the shared folder standing in for the blob store) with what it saw: its world, its host name and
the addresses it was told to use.
"""

import json
import os
import socket
import time
import typing

import psutil
from flytekit import task

from flytekitplugins.horovod import Horovod, HorovodJob, HorovodRunner, HorovodSpark, MPIJob, Worker, spark_run

IMPORTED = time.time()  # when a rank's Python got to import this module (how late it started)
PAYLOAD = 1 << 21  # float32 values per allreduce: 8 MiB, about that many bytes leave each of two hosts
STEP_PAYLOAD = 1 << 16  # per training step: 256 KiB

World = typing.NamedTuple("World", [("total", float), ("size", int), ("hosts", typing.List[str])])


def _lineage() -> typing.List[typing.Tuple[float, str]]:
    """This process and its parents, nearest first: when each started and its command line's start."""
    me = psutil.Process()
    return [(p.create_time(), " ".join(p.cmdline()[:3])) for p in [me, *me.parents()]]


def _mark(marker_dir: str, rank: int, **seen) -> None:
    os.makedirs(marker_dir, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k.startswith(("HOROVOD_", "OMPI_COMM_WORLD_", "FLYTE_INTERNAL_"))}
    path = os.path.join(marker_dir, f"rank-{rank}.json")
    with open(f"{path}.tmp", "w") as f:  # renamed whole: the test polls the folder and must never read half a file
        json.dump({"rank": rank, "pid": os.getpid(), "hostname": socket.gethostname(), "imported": IMPORTED,
                   "started": psutil.Process().create_time(), "env": env, "lineage": _lineage(), **seen}, f)
    os.replace(f"{path}.tmp", path)


def allreduce(marker_dir: str) -> typing.Tuple[float, int, typing.List[str]]:
    """One rank: allreduce ``rank + 1`` over PAYLOAD values; every value must be the sum over the ranks."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    rank, size = hvd.rank(), hvd.size()
    summed = hvd.allreduce(tf.fill([PAYLOAD], float(rank + 1)), op=hvd.Sum)
    low, high = float(tf.reduce_min(summed)), float(tf.reduce_max(summed))
    if low != high or low != size * (size + 1) / 2:
        raise ValueError(f"rank {rank}: allreduce gave values in [{low}, {high}], expected {size * (size + 1) / 2}")
    hosts = [h.decode() for h in hvd.allgather_object(socket.gethostname().encode())]
    _mark(marker_dir, rank, size=size, local_size=hvd.local_size(), total=low, hosts=hosts)
    # differs from a user's body: stay connected a moment, since the test's Observer samples connections from
    # outside every 0.2 s and a loaded 2-core machine stretches that; a short job could end between two samples
    time.sleep(1.5)
    return low, size, hosts


def train(marker_dir: str, steps: int) -> int:
    """A training loop's traffic: ``steps`` allreduces of STEP_PAYLOAD values, about 10 a second."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    rank = hvd.rank()
    for step in range(1, steps + 1):
        hvd.allreduce(tf.fill([STEP_PAYLOAD], 1.0), op=hvd.Sum, name="gradient")
        if step == 1:
            _mark(marker_dir, rank, size=hvd.size(), step=step)
        if step % 50 == 0:
            print(f"rank {rank} on {socket.gethostname()}: step {step}/{steps}", flush=True)
        time.sleep(0.1)
    return steps


def _world(marker_dir: str) -> World:
    return World(*allreduce(marker_dir))


# ---------------------------------------------------------------- MPI route: 2 worker hosts x 1 or 2 slots
@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi")))
def mpi_2x1(marker_dir: str) -> World:
    return _world(marker_dir)


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="gloo")))
def gloo_2x1(marker_dir: str) -> World:
    return _world(marker_dir)


@task(task_config=MPIJob(worker=Worker(replicas=2), slots=2, horovod=Horovod(controller="mpi")))
def mpi_2x2(marker_dir: str) -> World:
    return _world(marker_dir)


@task(task_config=MPIJob(worker=Worker(replicas=2), slots=2, horovod=Horovod(controller="gloo")))
def gloo_2x2(marker_dir: str) -> World:
    return _world(marker_dir)


@task(task_config=HorovodJob(worker=Worker(replicas=2), min_workers=1, max_workers=2, elastic_timeout=60))
def elastic_2x1(marker_dir: str) -> World:
    """kfmpi's elastic command: ``horovodrun --host-discovery-script ...`` with the operator's discovery script."""
    return _world(marker_dir)


@task(task_config=HorovodJob(worker=Worker(replicas=2), slots=2, min_workers=1, max_workers=2, elastic_timeout=60))
def elastic_2x2(marker_dir: str) -> World:
    return _world(marker_dir)


@task(task_config=HorovodJob(worker=Worker(replicas=2), min_workers=1, max_workers=2, elastic_timeout=60,
                             horovod=Horovod(stall_timeout=10)))
def elastic_stalls(marker_dir: str) -> int:
    """Rank 1 stuck in its own code (a data loader that never yields) while rank 0 waits in an allreduce."""
    import horovod.torch as hvd
    import torch

    @hvd.elastic.run
    def train(state) -> int:
        hvd.allreduce(torch.tensor(1.0), name="warm_up")
        _mark(marker_dir, hvd.rank(), size=hvd.size())
        if hvd.rank() == 1:
            time.sleep(600)
        hvd.allreduce(torch.tensor(1.0), name="epoch_metric")
        return hvd.size()

    return train(hvd.elastic.TorchState(step=0))


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi")))
def mpi_train(marker_dir: str, steps: int) -> int:
    return train(marker_dir, steps)


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="gloo")))
def gloo_train(marker_dir: str, steps: int) -> int:
    return train(marker_dir, steps)


@task(task_config=MPIJob(worker=Worker(replicas=2), slots=2, horovod=Horovod(controller="mpi")))
def mpi_train_2x2(marker_dir: str, steps: int) -> int:
    return train(marker_dir, steps)


@task(task_config=MPIJob(worker=Worker(replicas=2), slots=2, horovod=Horovod(controller="gloo")))
def gloo_train_2x2(marker_dir: str, steps: int) -> int:
    return train(marker_dir, steps)


# ---------------------------------------------------------------- Spark route: one rank per Spark worker
SparkWorlds = typing.NamedTuple("SparkWorlds", [("run_api", typing.List[float]), ("runner", float),
                                                ("master", str)])


@task(task_config=HorovodSpark(num_proc=2))
def spark_worlds(marker_dir: str) -> SparkWorlds:
    """The Run API (every rank's result) and ``HorovodRunner(np=2)`` in one Spark-route task."""
    import flytekit

    run_api = spark_run(allreduce, {"marker_dir": os.path.join(marker_dir, "run-api")}, all_ranks=True)
    runner = HorovodRunner(np=2).run(allreduce, marker_dir=os.path.join(marker_dir, "runner"))
    master = flytekit.current_context().spark_session.sparkContext.master
    return SparkWorlds([total for total, _, _ in run_api], runner[0], master)


@task(task_config=HorovodSpark(num_proc=2))
def spark_allreduce(marker_dir: str) -> typing.List[float]:
    return [total for total, _, _ in spark_run(allreduce, {"marker_dir": marker_dir}, all_ranks=True)]


@task(task_config=HorovodSpark(num_proc=2))
def spark_train(marker_dir: str, steps: int) -> int:
    return spark_run(train, {"marker_dir": marker_dir, "steps": steps})
