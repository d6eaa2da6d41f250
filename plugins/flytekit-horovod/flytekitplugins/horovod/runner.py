"""``HorovodRunner``: Databricks' HorovodRunner API, on a local process group or on Spark."""

import tempfile
from typing import Any, Callable, Optional

from .runtime import run_local, run_on_spark
from .settings import Horovod


class HorovodRunner:
    """Run a Horovod training function on ``np`` ranks and return rank 0's return value.

    ``np < 0`` runs ``-np`` ranks as local processes on this machine (no Spark needed); ``np > 0`` runs
    ``np`` ranks as Spark tasks of the active SparkSession (inside a HorovodSpark task: the task's session,
    settings and store). ``main`` and its keyword arguments are cloudpickled to every rank.
    """

    def __init__(self, np: int, settings: Optional[Horovod] = None):
        if np == 0:
            raise ValueError("HorovodRunner(np=0): use np > 0 for ranks as Spark tasks, np < 0 for local processes")
        self.np = np
        self.settings = settings

    def run(self, main: Callable, **kwargs: Any) -> Any:
        """Run ``main(**kwargs)`` on every rank; returns what rank 0 returned."""
        from .spark import current_horovod_spark

        try:
            task = current_horovod_spark()
        except RuntimeError:
            task = None
        settings = self.settings or (task.settings if task else Horovod())
        if self.np < 0:
            return run_local(main, kwargs, -self.np, settings)[0].value
        if task is not None:
            spark, failure_dir = task.spark, f"{task.store_prefix}/failures/runner"
        else:
            spark, failure_dir = _active_or_local_session(self.np), tempfile.mkdtemp(prefix="horovod-failures-")
        return run_on_spark(main, kwargs, self.np, settings, spark, failure_dir)[0].value


def _active_or_local_session(np: int):
    """The active SparkSession, or a local one with a slot per rank."""
    import os

    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    slots = max(np, os.cpu_count() or 1)
    return (
        SparkSession.builder.master(f"local[{slots}]")
        .appName("HorovodRunner")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
