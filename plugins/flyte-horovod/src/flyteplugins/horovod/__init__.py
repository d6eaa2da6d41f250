"""Horovod data-parallel training as Flyte 2 tasks: ``flyte.TaskEnvironment(plugin_config=MPIJob(...))``, or
``HorovodSpark(...)`` for the Spark route (``flyteplugins.horovod.spark``, with the ``spark`` extra: flyteplugins-spark).

The configs have the names and fields of ``flytekitplugins.horovod``'s, so a v1 task ports by moving its config onto
a ``TaskEnvironment``. What runs the ranks is the runtime the v1 plugin uses (``horovod_flyte_runtime``
and its local launcher), imported without flytekit: this package works where flytekit cannot be imported. Where
flyteplugins-spark is installed, a local run's plain ``Spark`` tasks get the local session of v1 (``local_spark``).
"""

import importlib.util

from horovod_flyte_runtime.settings import Horovod, HorovodConfigError

from .errors import RankFailedError, RankLostError, StalledRanksError
from .task import HorovodJob, HorovodMPITask, Launcher, MPIJob, RunPolicy, Worker

if importlib.util.find_spec("flyteplugins.spark") is not None:
    from . import local_spark  # noqa: F401  (a local run's plain Spark tasks get v1's local session)

__all__ = [
    "Horovod",
    "HorovodConfigError",
    "HorovodJob",
    "HorovodMPITask",
    "Launcher",
    "MPIJob",
    "RankFailedError",
    "RankLostError",
    "RunPolicy",
    "StalledRanksError",
    "Worker",
]

_SPARK_ROUTE = {"HorovodSpark", "HorovodSparkTask", "HorovodRunner", "spark_run", "spark_backend", "spark_store",
                "spark_checkpoint_url", "current_horovod_spark"}


def __getattr__(name: str):
    """The Spark route's names from ``flyteplugins.horovod.spark``, imported when first asked for: it needs
    flyteplugins-spark (and pyspark), which the MPI route does not."""
    if name in _SPARK_ROUTE:
        from . import spark

        return getattr(spark, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
