"""The Flyte tasks bench/launch.py calls: the MPI route with each controller, and a Spark-route task that
times ``horovod.spark.run`` and our ``spark_run`` on the same warm SparkSession."""

import json
import time

import flytekit
from flytekit import task

from bench import _body
from flytekitplugins.horovod import Horovod, HorovodSpark, MPIJob, Worker, spark_run


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="gloo")))
def allreduce_gloo() -> float:
    return _body.allreduce()


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi")))
def allreduce_mpi() -> float:
    return _body.allreduce()


def _timed_check(call) -> float:
    start = time.perf_counter()
    values = call()
    seconds = time.perf_counter() - start
    if values != 3.0:
        raise AssertionError(f"expected an allreduce of 3.0, got {values}")
    return seconds


@task(task_config=HorovodSpark(num_proc=2, spark_conf={"spark.ui.enabled": "false"}))
def spark_launches(reps: int) -> str:
    """Round-robin: bare ``horovod.spark.run`` vs our ``spark_run``, on this task's (warm) SparkSession."""
    import horovod.spark

    sc = flytekit.current_context().spark_session.sparkContext
    sc.parallelize(range(2), 2).map(lambda x: x).collect()  # start the Python workers for both alike
    contestants = {
        "horovod.spark.run": lambda: _timed_check(
            lambda: horovod.spark.run(_body.init_and_allreduce, num_proc=2, use_gloo=True)[0]),
        "spark_run (ours)": lambda: _timed_check(lambda: spark_run(_body.allreduce)),
    }
    # The first call of each in this session also imports its code into Spark's Python workers.
    first = {name: measure() for name, measure in contestants.items()}
    print(f"  first calls in the session: {first}", flush=True)
    samples = {name: [] for name in contestants}
    for rep in range(reps):
        for name, measure in contestants.items():
            samples[name].append(measure())
            print(f"  rep {rep + 1}/{reps} {name}: {samples[name][-1]:.3f}", flush=True)
    return json.dumps({"master": sc.master, "samples": samples, "first": first})
