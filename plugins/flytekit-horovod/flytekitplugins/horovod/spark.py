"""The Spark route: a Flyte Spark task whose body can run Horovod inside the same Spark cluster."""

import contextlib
import math
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, Optional

from flytekit import FlyteContextManager
from flytekit.configuration import SerializationSettings
from flytekit.core.context_manager import ExecutionParameters
from flytekit.extend import ExecutionState, TaskPlugins
from flytekitplugins.spark import Spark
from flytekitplugins.spark.task import PysparkFunctionTask

from .runtime import logger, run_on_spark, spark_slots
from .settings import Horovod, HorovodConfigError

CONTEXT_ATTR = "HOROVOD_SPARK"  # flytekit.current_context().horovod_spark inside a HorovodSpark task


@dataclass
class HorovodSpark(Spark):
    """flytekitplugins-spark's ``Spark`` config plus the number of Horovod ranks and their settings.

    Serializes as a ``spark`` task; the executor slots Horovod needs (``num_proc`` Spark tasks at once) are
    added to ``spark_conf`` where the user left them unset, and a user's explicit values are kept.
    """

    num_proc: int = 2
    horovod: Horovod = field(default_factory=Horovod)

    def __post_init__(self):
        super().__post_init__()
        if self.num_proc < 1:
            raise HorovodConfigError(f"HorovodSpark(num_proc={self.num_proc}): needs at least one Horovod rank")
        slots = cluster_slots(horovod_spark_conf(self.spark_conf, self.num_proc))
        if slots < self.num_proc:
            raise HorovodConfigError(
                f"HorovodSpark(num_proc={self.num_proc}) needs {self.num_proc} Spark task slots at once, but spark_conf "
                f"gives {slots}: {_slot_formula(self.spark_conf)}; raise spark.executor.instances or "
                "spark.executor.cores, or lower num_proc"
            )


def horovod_spark_conf(spark_conf: Dict[str, str], num_proc: int) -> Dict[str, str]:
    """``spark_conf`` with the settings that give ``num_proc`` simultaneous task slots, where unset."""
    conf = dict(spark_conf)
    conf.setdefault("spark.executor.cores", "1")
    conf.setdefault("spark.task.cpus", "1")
    tasks_per_executor = max(1, int(conf["spark.executor.cores"]) // int(conf["spark.task.cpus"]))
    conf.setdefault("spark.executor.instances", str(math.ceil(num_proc / tasks_per_executor)))
    return conf


def cluster_slots(conf: Dict[str, str]) -> int:
    """Task slots a cluster with this conf runs at once: executors x (cores per executor // cpus per task)."""
    return int(conf["spark.executor.instances"]) * (int(conf["spark.executor.cores"]) // int(conf["spark.task.cpus"]))


def _slot_formula(conf: Dict[str, str]) -> str:
    keys = ("spark.executor.instances", "spark.executor.cores", "spark.task.cpus")
    return " x ".join(f"{k}={conf.get(k, '(default)')}" for k in keys)


@dataclass
class HorovodSparkContext:
    """What a HorovodSpark task body can use: its ranks, settings, SparkSession and Flyte-managed store root."""

    num_proc: int
    settings: Horovod
    spark: Any
    store_prefix: str

    def backend(self, **kwargs):
        """A ``SparkBackend`` for the Estimator API with this task's ranks and Horovod settings."""
        from horovod.spark.common.backend import SparkBackend

        options = dict(
            num_proc=self.num_proc,
            env=self.settings.env(),
            start_timeout=self.settings.start_timeout,
            use_gloo=self.settings.controller == "gloo",
            use_mpi=self.settings.controller == "mpi",
            verbose=2 if self.settings.verbose else 1,
        )
        if self.settings.controller == "mpi":
            options["extra_mpi_args"] = "--allow-run-as-root"
        return SparkBackend(**{**options, **kwargs})

    def store(self, name: str = "store"):
        """A Horovod ``Store`` under this task's working area (local run) or raw output prefix (cluster)."""
        from horovod.spark.common.store import Store

        return Store.create(f"{self.store_prefix}/{name}")

    def run(self, fn: Callable, kwargs: Optional[Dict[str, Any]] = None, all_ranks: bool = False):
        """Run ``fn(**kwargs)`` on ``num_proc`` ranks as Spark tasks; rank 0's result (or every rank's)."""
        results = run_on_spark(fn, kwargs, self.num_proc, self.settings, self.spark,
                               failure_dir=f"{self.store_prefix}/failures/{uuid.uuid4().hex}", all_ranks=all_ranks)
        return [r.value for r in results] if all_ranks else results[0].value


def current_horovod_spark() -> HorovodSparkContext:
    """The ``HorovodSparkContext`` of the running HorovodSpark task (raises a clear error elsewhere)."""
    import flytekit

    try:
        return getattr(flytekit.current_context(), CONTEXT_ATTR.lower())
    except (AssertionError, AttributeError):
        raise RuntimeError("no Horovod Spark context here: call this inside a @task(task_config=HorovodSpark(...))")


def spark_backend(**kwargs):
    """The Estimator API backend of the running HorovodSpark task (see ``HorovodSparkContext.backend``)."""
    return current_horovod_spark().backend(**kwargs)


def spark_store(name: str = "store"):
    """A Horovod ``Store`` managed by Flyte for the running HorovodSpark task."""
    return current_horovod_spark().store(name)


def spark_run(fn: Callable, kwargs: Optional[Dict[str, Any]] = None, all_ranks: bool = False):
    """Run API inside a HorovodSpark task: ``fn`` on ``num_proc`` ranks; rank 0's result (or all ranks')."""
    return current_horovod_spark().run(fn, kwargs, all_ranks)


class HorovodSparkFunctionTask(PysparkFunctionTask):
    """A Spark task (type ``spark``) whose body runs on the driver with Horovod helpers at hand."""

    def get_custom(self, settings: SerializationSettings) -> Dict[str, Any]:
        custom = super().get_custom(settings)
        custom["sparkConf"] = horovod_spark_conf(self.task_config.spark_conf, self.task_config.num_proc)
        return custom

    def pre_execute(self, user_params: ExecutionParameters) -> ExecutionParameters:
        ctx = FlyteContextManager.current_context()
        local = not (ctx.execution_state and ctx.execution_state.mode == ExecutionState.Mode.TASK_EXECUTION)
        with self._local_master(local):
            params = super().pre_execute(user_params)
        if local and spark_slots(self.sess) < self.task_config.num_proc:
            logger.info("the running SparkSession has too few slots for %d ranks; starting a new one",
                        self.task_config.num_proc)
            self.sess.stop()
            with self._local_master(local):
                params = super().pre_execute(user_params)
        prefix = user_params.raw_output_prefix
        if not ctx.file_access.is_remote(prefix):
            prefix = os.path.join(str(user_params.working_directory), "horovod")
        else:
            prefix = f"{prefix.rstrip('/')}/horovod"
        horovod = HorovodSparkContext(self.task_config.num_proc, self.task_config.horovod, self.sess, prefix)
        params = params.builder().add_attr(CONTEXT_ATTR, horovod).build()
        # flytekit's dispatch_execute rebuilds the parameters from the incoming ones when enable_deck=True,
        # dropping what pre_execute added (the Spark session too); keep them on the incoming object as well.
        user_params._attrs.update(params._attrs)
        return params

    @contextlib.contextmanager
    def _local_master(self, local: bool) -> Iterator[None]:
        """In a local run, give the session a ``local[N]`` master with a slot per rank (unless the user chose)."""
        config = self.task_config
        original = config.spark_conf
        if local and "spark.master" not in original:
            slots = max(config.num_proc, os.cpu_count() or 1)
            config.spark_conf = {**original, "spark.master": f"local[{slots}]"}
        try:
            yield
        finally:
            config.spark_conf = original


TaskPlugins.register_pythontask_plugin(HorovodSpark, HorovodSparkFunctionTask)
