"""Small workflows for the cluster-path tests: serialized with ``pyflyte package``, then run by the exact commands
the MPI operator's launcher and the Spark operator's driver would run.

Every rank writes ``rank-<r>.json`` into ``marker_dir`` (a plain path, shared by the ranks of a local run), so a test
can prove how many ranks ran the body and what each one saw. ``rank_one_fails``, ``rank_one_killed_*`` and
``out_of_step_*`` are the failure paths. ``CLUSTER_FLOWS_BREAK`` deliberately breaks the config
(``ranks``: 3 MPI ranks instead of 2; ``task_type``: the Spark-route task loses its Spark config) so that a test can
show the registration checks catch it.
"""

import json
import os
import sys
import typing

import flytekit
from flytekit import task, workflow
from flytekit.types.directory import FlyteDirectory

from flytekitplugins.horovod import Horovod, HorovodJob, HorovodSpark, Launcher, MPIJob, Worker, spark_run

BREAK = set(filter(None, os.environ.get("CLUSTER_FLOWS_BREAK", "").split(",")))
MPI_WORKERS = 3 if "ranks" in BREAK else 2
SPARK_CONFIG = None if "task_type" in BREAK else HorovodSpark(num_proc=2, spark_conf={"spark.sql.shuffle.partitions": "4"})

Allreduce = typing.NamedTuple("Allreduce", [("total", float), ("size", int), ("model", FlyteDirectory)])


def _allreduce_and_mark(scale: float, marker_dir: str) -> typing.Tuple[int, int, float]:
    """One rank: a real allreduce of ``scale * (rank + 1)``, then a marker file with what this rank saw."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    rank, size = hvd.rank(), hvd.size()
    total = float(hvd.allreduce(tf.constant(scale * (rank + 1)), op=hvd.Sum))
    seen = {
        "rank": rank,
        "size": size,
        "total": total,
        "pid": os.getpid(),
        "env": {k: os.environ.get(k) for k in ("OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "HOROVOD_CONTROLLER",
                                               "HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME",
                                               "FLYTE_INTERNAL_EXECUTION_ID")},
    }
    os.makedirs(marker_dir, exist_ok=True)
    with open(os.path.join(marker_dir, f"rank-{rank}.json"), "w") as f:
        json.dump(seen, f)
    return rank, size, total


def _model_dir(rank: int, total: float) -> FlyteDirectory:
    """A directory output, as a training task returns its model; written by the rank that runs this."""
    out = os.path.join(flytekit.current_context().working_directory, "model")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "weights.txt"), "w") as f:
        f.write(f"total={total} rank={rank}\n")
    return FlyteDirectory(out)


@task(
    task_config=MPIJob(
        launcher=Launcher(replicas=1),
        worker=Worker(replicas=MPI_WORKERS),
        horovod=Horovod(controller="mpi", fusion_threshold_mb=32),
    )
)
def allreduce_mpi(scale: float, marker_dir: str) -> Allreduce:
    """MPI route, controller mpi: the launcher runs ``mpirun -np 2 ... pyflyte-execute``; this body runs per rank."""
    rank, size, total = _allreduce_and_mark(scale, marker_dir)
    return Allreduce(total, size, _model_dir(rank, total))


@task(task_config=MPIJob(worker=Worker(replicas=1), slots=2,
                         horovod=Horovod(controller="gloo", cycle_time_ms=2.5, timeline_filename="timeline.json")))
def allreduce_gloo(scale: float, marker_dir: str) -> Allreduce:
    """MPI route, controller gloo: the launcher runs ``horovodrun -np 2 --hostfile ... --gloo ... pyflyte-execute``."""
    rank, size, total = _allreduce_and_mark(scale, marker_dir)
    return Allreduce(total, size, _model_dir(rank, total))


SparkResult = typing.NamedTuple("SparkResult", [("totals", typing.List[float]), ("rows", int),
                                                ("conf", typing.Dict[str, str]), ("model", FlyteDirectory)])


@task(task_config=SPARK_CONFIG)
def spark_allreduce(scale: float, marker_dir: str) -> SparkResult:
    """Spark route: the body runs on the Spark driver; the ranks run as Spark tasks through ``spark_run``."""
    spark = flytekit.current_context().spark_session
    rows = spark.range(0, 1000, numPartitions=4).count()
    results = spark_run(_allreduce_and_mark, {"scale": scale, "marker_dir": marker_dir}, all_ranks=True)
    totals = [total for _, _, total in results]
    conf = {  # what the driver's session was started with
        "master": spark.sparkContext.master,
        "spark.sql.shuffle.partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "driver_python": sys.executable,
        "driver_pid": str(os.getpid()),
    }
    return SparkResult(totals, rows, conf, _model_dir(-1, totals[0]))


@task
def report(mpi_model: FlyteDirectory, spark_model: FlyteDirectory) -> str:
    """A plain task downstream of both routes, reading both directory outputs."""
    texts = []
    for d in (mpi_model, spark_model):
        with open(os.path.join(d.download(), "weights.txt")) as f:
            texts.append(f.read().strip())
    return " | ".join(texts)


@workflow
def cluster_wf(scale: float = 1.0, marker_dir: str = "/tmp/markers") -> typing.Tuple[str, FlyteDirectory]:
    """Spark route and MPI route side by side, joined by a plain task: the edges the registration test checks."""
    mpi = allreduce_mpi(scale=scale, marker_dir=marker_dir)
    sp = spark_allreduce(scale=scale, marker_dir=marker_dir)
    return report(mpi_model=mpi.model, spark_model=sp.model), mpi.model


@workflow
def gloo_wf(scale: float = 1.0, marker_dir: str = "/tmp/markers") -> float:
    return allreduce_gloo(scale=scale, marker_dir=marker_dir).total


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi")))
def rank_one_fails() -> float:
    """MPI route: rank 1 raises; rank 0 then fails in the allreduce rank 1 never joins."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    if hvd.rank() == 1:
        raise ValueError("rank one cannot go on")
    return float(hvd.allreduce(tf.constant(1.0)))


def _rank_one_lost(how: str) -> float:
    """Rank 1 is killed (as by the OOM killer) or raises, after the ranks met; rank 0 goes on until it notices."""
    import signal

    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.allreduce(tf.constant(1.0))
    if hvd.rank() == 1:
        if how == "raise":
            raise ValueError("rank one cannot go on")
        os.kill(os.getpid(), signal.SIGKILL)
    for _ in range(1000):
        hvd.allreduce(tf.constant(1.0))
    return 0.0


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi")))
def rank_one_killed_mpi() -> float:
    """MPI route, controller mpi: rank 1 is killed after the ranks met; mpirun exits non-zero."""
    return _rank_one_lost("kill")


@task(task_config=MPIJob(worker=Worker(replicas=1), slots=2, horovod=Horovod(controller="gloo")))
def rank_one_killed_gloo() -> float:
    """MPI route, controller gloo: rank 1 is killed after the ranks met; horovodrun exits non-zero."""
    return _rank_one_lost("kill")


def _rank_one_out_of_step() -> float:
    """Rank 1 sleeps in its own code, outside any collective, while rank 0 waits in an allreduce."""
    import time

    import horovod.torch as hvd
    import torch

    hvd.allreduce(torch.tensor(1.0), name="warm_up")
    print(f"rank {hvd.rank()} out of step from {time.time():.3f}", flush=True)  # the stall begins: tests time from here
    if hvd.rank() == 1:
        time.sleep(600)  # a data loader that never yields
    return float(hvd.allreduce(torch.tensor(1.0), name="epoch_metric"))


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi", framework="pytorch",
                                                                   stall_timeout=8)))
def out_of_step_mpi() -> float:
    """MPI route, controller mpi: rank 1 out of step; Horovod's stall check stops the ranks after 8 s."""
    return _rank_one_out_of_step()


@task(task_config=MPIJob(worker=Worker(replicas=1), slots=2, horovod=Horovod(controller="gloo",
                                                                                 framework="pytorch", stall_timeout=8)))
def out_of_step_gloo() -> float:
    """MPI route, controller gloo (horovodrun): rank 1 out of step; stopped after 8 s."""
    return _rank_one_out_of_step()


@task(task_config=MPIJob(worker=Worker(replicas=1), slots=2, horovod=Horovod(controller="gloo")))
def waits_to_be_stopped(marker_dir: str) -> float:
    """MPI route: every rank marks that it runs, then waits to be stopped, as when Flyte aborts the task."""
    import time

    os.makedirs(marker_dir, exist_ok=True)
    with open(os.path.join(marker_dir, f"rank-{os.environ['HOROVOD_RANK']}.json"), "w") as f:
        json.dump({"pid": os.getpid()}, f)
    time.sleep(600)
    return 0.0


@task(task_config=SPARK_CONFIG)
def spark_rank_fails(how: str) -> float:
    """Spark route: one rank is lost (``how="kill"``: Flyte may retry) or its body raises (``"raise"``: it may not)."""
    return spark_run(_rank_one_lost, {"how": how})


@task(task_config=HorovodJob(worker=Worker(replicas=2), min_workers=1, max_workers=2, elastic_timeout=60))
def elastic_allreduce(scale: float, marker_dir: str) -> float:
    """Elastic MPI route: the launcher runs kfmpi's ``horovodrun ... --host-discovery-script ... pyflyte-execute``."""
    return _allreduce_and_mark(scale, marker_dir)[2]


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi")))
def wedges_mpirun() -> float:
    """MPI route, controller mpi: after an allreduce rank 0 stops its launcher, mpirun (SIGSTOP), and both ranks
    return: mpirun never exits (the ranks' MPI_Finalize waits for it). Rank 0 stamps when into ``WEDGE_STAMP``."""
    import signal
    import time

    import horovod.tensorflow as hvd
    import tensorflow as tf

    total = float(hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum).numpy())
    if hvd.rank() == 0:
        with open(f"/proc/{os.getppid()}/comm") as f:
            parent = f.read().strip()
        assert parent == "mpirun", f"rank 0's parent is {parent!r}, not mpirun"
        with open(os.environ["WEDGE_STAMP"], "w") as f:
            f.write(repr(time.time()))
        os.kill(os.getppid(), signal.SIGSTOP)
    return total
