"""``HorovodRunner``: Databricks' HorovodRunner API, on a local process group or on Spark."""

import tempfile
from typing import Any, Callable, Optional

from .local_launcher import run_local
from .settings import Horovod, HorovodConfigError, whole_number
from .spark_context import current_horovod_spark
from .spark_launcher import run_on_spark
from .spark_session import prepare_local_session


class HorovodRunner:
    """Run a Horovod training function on ``np`` ranks and return rank 0's return value.

    ``np < 0`` runs ``-np`` ranks as local processes on this machine (no Spark needed); ``np > 0`` runs
    ``np`` ranks as Spark tasks of the active SparkSession (inside a HorovodSpark task: the task's session,
    settings and store; ``np`` must then fit the slots the task reserved). ``settings`` overrides the Horovod
    settings (default: the task's, or ``Horovod()`` outside one). ``main`` and its keyword arguments are
    cloudpickled to every rank.
    """

    def __init__(self, np: int, settings: Optional[Horovod] = None):
        if not whole_number(np) or np == 0:
            raise HorovodConfigError(f"HorovodRunner(np={np!r}): np must be a whole number, > 0 for ranks as Spark "
                                     "tasks, < 0 for local processes")
        if settings is not None and not isinstance(settings, Horovod):
            raise HorovodConfigError(f"HorovodRunner(settings=...) must be a Horovod(...), got {type(settings).__name__}")
        self.np = np
        self.settings = settings

    def run(self, main: Callable, **kwargs: Any) -> Any:
        """Run ``main(**kwargs)`` on every rank; returns what rank 0 returned."""
        try:
            task = current_horovod_spark()
        except RuntimeError:
            task = None
        settings = self.settings or (task.settings if task else Horovod())
        if self.np < 0:
            return run_local(main, kwargs, -self.np, settings, says_where=task is None)[0].value
        if task is not None:
            spark, failure_dir = task.spark, f"{task.store_prefix}/failures/runner"
        else:
            spark, failure_dir = _active_or_local_session(self.np), tempfile.mkdtemp(prefix="horovod-failures-")
        return run_on_spark(main, kwargs, self.np, settings, spark, failure_dir)[0].value


def _active_or_local_session(np: int):
    """The active SparkSession, or a local one with a slot per rank."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName("HorovodRunner")
    for key, value in prepare_local_session(np).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
