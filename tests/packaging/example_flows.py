"""A user's own workflow file, for the installed plugin: a 2-rank MPIJob and a 2-rank HorovodSpark task."""

import typing

from flytekit import task, workflow

from flytekitplugins.horovod import HorovodSpark, MPIJob, Worker, spark_run


def _sum_of_ranks_plus_one() -> float:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    return float(hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum))


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def mpi_allreduce() -> float:
    import flytekit

    return _sum_of_ranks_plus_one() + 0 * len(flytekit.__version__)


@task(task_config=HorovodSpark(num_proc=2))
def spark_allreduce() -> float:
    return spark_run(_sum_of_ranks_plus_one)


@workflow
def mpi_wf() -> float:
    return mpi_allreduce()


@workflow
def spark_wf() -> float:
    return spark_allreduce()


@task
def versions() -> typing.List[str]:
    import flytekit
    import pyspark

    return [flytekit.__version__, pyspark.__version__]


@workflow
def versions_wf() -> typing.List[str]:
    return versions()
