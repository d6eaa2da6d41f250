"""Horovod's Estimator ``Backend`` on this plugin's Spark launcher, which ``spark_backend()`` returns.

Horovod's own ``SparkBackend`` runs the Estimators' training function through ``horovod.spark.run``: a driver service,
a task service per Spark task, NIC discovery, then Horovod's launcher through those services, and results back the
same way (about 5 s more than one barrier stage for a 2-rank job, docs/performance.md section 1). ``RanksOnSpark`` runs
it as ``spark_run`` runs a function: one barrier-mode Spark stage, a rank process per task, the result through a pipe;
so the Estimators also get what the plugin's ranks have (a failure named with its rank and host, a lost rank found
by the heartbeat, every rank's lines in the task's log and Deck).
"""

import functools
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from horovod.spark.common.backend import Backend


class RanksOnSpark(Backend):
    """A ``horovod.spark.common.backend.Backend`` whose ``run`` is ``launch(fn, env=...)``: a list of every rank's
    value (by rank), as the Estimators expect; ``env`` is this backend's, updated by the Estimator's own."""

    def __init__(self, launch: Callable[..., List[Any]], num_proc: int, env: Optional[Dict[str, str]] = None):
        self._launch, self._num_proc, self._env = launch, num_proc, dict(env or {})

    def run(self, fn: Callable, args: Sequence[Any] = (), kwargs: Optional[Mapping[str, Any]] = None,
            env: Optional[Mapping[str, str]] = None) -> List[Any]:
        """``fn(*args, **kwargs)`` on every rank; every rank's return value, ordered by rank."""
        return self._launch(functools.partial(fn, *args, **dict(kwargs or {})), env={**self._env, **dict(env or {})})

    def num_processes(self) -> int:
        return self._num_proc
