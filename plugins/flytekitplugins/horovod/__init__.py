"""Horovod data-parallel training as Flyte tasks, through Kubernetes MPI jobs and through Spark.

.. autosummary::
   Horovod
   MPIJob
"""

from flytekitplugins.kfmpi import CleanPodPolicy, Launcher, RestartPolicy, RunPolicy, Worker

from .mpi import HorovodMPIFunctionTask, MPIJob
from .runtime import RankFailedError
from .settings import Horovod, HorovodConfigError, compression, current_settings

__all__ = [
    "CleanPodPolicy",
    "Horovod",
    "HorovodConfigError",
    "HorovodMPIFunctionTask",
    "Launcher",
    "MPIJob",
    "RankFailedError",
    "RestartPolicy",
    "RunPolicy",
    "Worker",
    "compression",
    "current_settings",
]
