"""Horovod data-parallel training as Flyte tasks, through Kubernetes MPI jobs and through Spark.

MPI route: ``@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(...)))``.
Spark route: ``@task(task_config=HorovodSpark(num_proc=2, horovod=Horovod(...)))`` with ``spark_run``,
``spark_backend`` and ``spark_store`` in the body. Anywhere: ``HorovodRunner(np=2).run(main, **kwargs)``.
"""

import os
import sys

# Spark's Python workers run ``python3`` from PATH unless told otherwise; in a local run that can be another
# interpreter than the one with Horovod and TensorFlow. On a cluster the Spark operator sets PYSPARK_PYTHON.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from flytekitplugins.kfmpi import CleanPodPolicy, Launcher, RestartPolicy, RunPolicy, Worker

from .mpi import HorovodMPIFunctionTask, MPIJob
from .runner import HorovodRunner
from .runtime import NotEnoughSlotsError, RankFailedError
from .spark import (
    HorovodSpark,
    HorovodSparkContext,
    HorovodSparkFunctionTask,
    current_horovod_spark,
    spark_backend,
    spark_run,
    spark_store,
)
from .settings import Horovod, HorovodConfigError, compression, current_settings

__all__ = [
    "CleanPodPolicy",
    "Horovod",
    "HorovodConfigError",
    "HorovodMPIFunctionTask",
    "HorovodRunner",
    "HorovodSpark",
    "HorovodSparkContext",
    "HorovodSparkFunctionTask",
    "Launcher",
    "MPIJob",
    "NotEnoughSlotsError",
    "RankFailedError",
    "RestartPolicy",
    "RunPolicy",
    "Worker",
    "compression",
    "current_horovod_spark",
    "current_settings",
    "spark_backend",
    "spark_run",
    "spark_store",
]
