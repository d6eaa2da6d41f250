"""What a HorovodSpark task body uses (``HorovodSparkContext``, from ``current_horovod_spark()``): its ranks run as
Spark tasks (``spark_run``), an Estimator backend (``spark_backend``), a store under the task's working area
(``spark_store``) and its Flyte checkpoint (``spark_checkpoint_url``)."""

import contextvars
import functools
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from . import _shims
from .rank_output import RankOutput
from .settings import Horovod, HorovodConfigError, whole_number
from .spark_launcher import run_on_spark

CONTEXT_ATTR = "HOROVOD_SPARK"  # flytekit.current_context().horovod_spark inside a HorovodSpark task
# The context of a running Flyte 2 HorovodSpark task (flyteplugins.horovod.spark), which has no flytekit context
RUNNING: contextvars.ContextVar[Optional["HorovodSparkContext"]] = contextvars.ContextVar("horovod_spark", default=None)


@dataclass
class HorovodSparkContext:
    """What a HorovodSpark task body can use: its ranks, settings, SparkSession and Flyte-managed store root."""

    num_proc: int
    settings: Horovod
    spark: Any
    store_prefix: str
    outputs: List[RankOutput] = field(default_factory=list)  # of the backends made: closed when the task ends

    def backend(self, num_proc: Optional[int] = None, env: Optional[Dict[str, str]] = None):
        """A Horovod ``Backend`` for the Estimator API (``RanksOnSpark``): the training function on ``num_proc``
        ranks (default: the task's), one barrier-mode Spark task each, with this task's Horovod settings and ``env``
        added to the ranks' environment. Asking for more ranks than the task reserved slots for is refused."""
        from .estimator_backend import RanksOnSpark

        num_proc = self.num_proc if num_proc is None else num_proc
        if not whole_number(num_proc, at_least=1) or num_proc > self.num_proc:
            raise HorovodConfigError(f"spark_backend(num_proc={num_proc!r}): this task reserved Spark slots "
                                     f"for {self.num_proc} ranks (HorovodSpark(num_proc={self.num_proc}))")
        output = RankOutput.for_launch(self.settings.verbose)
        self.outputs.append(output)
        ranks_env = dict(env or {})
        scratch = self.scratch_dir()
        if scratch is not None:
            ranks_env.setdefault("TMPDIR", scratch)

        return RanksOnSpark(functools.partial(self.run, num_proc=num_proc, all_ranks=True, output=output), num_proc,
                            ranks_env)

    def scratch_dir(self) -> Optional[str]:
        """In a local run, the ranks' TMPDIR (TensorBoard logs, checkpoints before their copy) under the task's
        working directory, made here; None on a cluster, where each executor keeps its own TMPDIR."""
        if "://" in self.store_prefix:
            return None
        scratch = os.path.join(os.path.abspath(self.store_prefix), "scratch")
        os.makedirs(scratch, exist_ok=True)
        return scratch

    def store(self, name: str = "store"):
        """A Horovod ``Store`` under this task's working area (local run) or raw output prefix (cluster)."""
        from horovod.spark.common.store import FilesystemStore, Store

        from .quiet_store import QuietStore

        prefix = f"{self.store_prefix}/{name}"
        store = Store.create(prefix)  # HDFS or DBFS as Horovod chooses; local paths and fsspec URLs quietly
        return QuietStore(prefix) if type(store) is FilesystemStore else store

    def run(self, fn: Callable, kwargs: Optional[Dict[str, Any]] = None, all_ranks: bool = False, *,
            num_proc: Optional[int] = None, env: Optional[Dict[str, str]] = None,
            output: Optional[RankOutput] = None) -> Any:
        """Run ``fn(**kwargs)`` on ``num_proc`` ranks (default: the task's) as Spark tasks (``run_on_spark`` with this
        task's settings, session and failure folder, ``env`` added to the ranks' environment, their lines to
        ``output``); rank 0's result, or with ``all_ranks`` every rank's, by rank."""
        results = run_on_spark(fn, kwargs, num_proc or self.num_proc, self.settings, self.spark,
                               failure_dir=f"{self.store_prefix}/failures/{uuid.uuid4().hex}", all_ranks=all_ranks,
                               env=env, output=output)
        return [r.value for r in results] if all_ranks else results[0].value


def current_horovod_spark() -> HorovodSparkContext:
    """The ``HorovodSparkContext`` of the running HorovodSpark task, Flyte 2's or flytekit's (raises a clear error
    elsewhere)."""
    if RUNNING.get() is not None:
        return RUNNING.get()
    import flytekit

    try:
        params = flytekit.current_context()
    except AssertionError:
        params = None
    if params is None or not params.has_attr(CONTEXT_ATTR):
        raise RuntimeError("no Horovod Spark context here: call this inside a @task(task_config=HorovodSpark(...))")
    return getattr(params, CONTEXT_ATTR.lower())


def spark_backend(**kwargs):
    """The Estimator API backend of the running HorovodSpark task (see ``HorovodSparkContext.backend``)."""
    return current_horovod_spark().backend(**kwargs)


def spark_store(name: str = "store"):
    """A Horovod ``Store`` managed by Flyte for the running HorovodSpark task."""
    return current_horovod_spark().store(name)


def spark_checkpoint_url() -> Optional[str]:
    """Where the running task's Flyte checkpoint is saved (a local folder in a local run, the checkpoint prefix on a
    cluster), for Spark-route ranks, which write it without flytekit; None where the execution has no checkpoint
    (a Flyte 2 task: its checkpoints are not wired to the ranks yet)."""
    if RUNNING.get() is not None:
        return None
    import flytekit

    try:
        checkpoint = flytekit.current_context().checkpoint
    except NotImplementedError:
        return None
    destination, _ = _shims.checkpoint_paths(checkpoint)
    return str(destination) if destination else None


def spark_run(fn: Callable, kwargs: Optional[Dict[str, Any]] = None, all_ranks: bool = False):
    """Run API inside a HorovodSpark task: ``fn(**kwargs)`` on ``num_proc`` ranks; rank 0's result (or all ranks').

    The keyword arguments are one dict (not ``**kwargs``) so that ``all_ranks`` can never collide with them.
    """
    return current_horovod_spark().run(fn, kwargs, all_ranks)
