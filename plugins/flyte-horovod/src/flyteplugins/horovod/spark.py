"""The Spark route on Flyte 2: ``HorovodSpark`` (flyteplugins-spark's ``Spark`` plus the v1 plugin's ``num_proc`` and
``horovod``) and the task class that runs its body on the Spark driver with the v1 plugin's helpers at hand:
``spark_run``, ``HorovodRunner``, ``spark_backend`` and ``spark_store`` (``flytekitplugins.horovod``'s, which find
this task's context without flytekit).

A local run starts a local session with a slot per rank, its driver on loopback (the v1 plugin's local session);
the serialized task is flyteplugins-spark's, its ``sparkConf`` with the slots the ranks need, as the v1 plugin's.
Nothing here imports flytekit.
"""

import os
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from flyte._context import internal_ctx
from flyte.extend import TaskPluginRegistry
from flyte.models import SerializationContext
from flyteplugins.spark.task import PysparkFunctionTask, Spark

from horovod_flyte_runtime.noise import quiet_this_process
from horovod_flyte_runtime.rank import import_path
from horovod_flyte_runtime.runner import HorovodRunner
from horovod_flyte_runtime.settings import Horovod
from horovod_flyte_runtime.spark_context import (
    RUNNING,
    HorovodSparkContext,
    current_horovod_spark,
    spark_backend,
    spark_checkpoint_url,
    spark_run,
    spark_store,
)
from horovod_flyte_runtime.spark_session import (
    check_horovod_spark,
    horovod_spark_conf,
    importable_in_workers,
    prepare_local_session,
    session_fits,
)

from .local_spark import in_local_run, local_session

__all__ = ["HorovodRunner", "HorovodSpark", "HorovodSparkTask", "current_horovod_spark", "spark_backend",
           "spark_checkpoint_url", "spark_run", "spark_store"]


@dataclass
class HorovodSpark(Spark):
    """``flytekitplugins.horovod.HorovodSpark`` for a ``flyte.TaskEnvironment``: flyteplugins-spark's ``Spark`` plus
    the number of Horovod ranks (``num_proc``, one Spark task each) and their settings. Checked when made, as in v1:
    ``HorovodConfigError`` for a rank count that is not a whole number >= 1, or that ``spark_conf`` has too few task
    slots for."""

    num_proc: int = 2
    horovod: Horovod = field(default_factory=Horovod)

    def __post_init__(self):
        super().__post_init__()
        check_horovod_spark(self.num_proc, self.spark_conf, self.horovod)


def _local_store_prefix(raw_data_path: str) -> str:
    """Where a local run keeps the ranks' logs, failure records, scratch files and Estimator store: under the run's
    raw data folder, as flyte's local outputs are."""
    folder = raw_data_path[len("file://"):] if raw_data_path.startswith("file://") else raw_data_path
    return os.path.join(folder, "horovod")


@dataclass(kw_only=True)
class HorovodSparkTask(PysparkFunctionTask):
    """A Flyte 2 Spark task (type ``spark``) whose body runs on the driver with Horovod's Spark helpers at hand."""

    plugin_config: HorovodSpark

    async def pre(self, *args, **kwargs) -> Dict[str, Any]:
        config, tctx = self.plugin_config, internal_ctx().data.task_context
        quiet_this_process(config.horovod.verbose)
        if not in_local_run():
            data = await super().pre(*args, **kwargs)
            spark, prefix = data["spark_session"], f"{tctx.raw_data_path.path.rstrip('/')}/horovod"
        else:
            conf = prepare_local_session(config.num_proc, config.spark_conf)
            spark = local_session(conf)
            if not session_fits(spark, config.num_proc):  # one from an earlier task of this process, too small
                spark.stop()
                spark = local_session(conf)
            importable_in_workers(spark, import_path(self.func))
            prefix = _local_store_prefix(tctx.raw_data_path.path if tctx else os.getcwd())
            data = {"spark_session": spark}
        RUNNING.set(HorovodSparkContext(config.num_proc, config.horovod, spark, prefix))  # the body's context
        return data

    async def execute(self, *args, **kwargs) -> Any:
        try:
            return await super().execute(*args, **kwargs)
        finally:
            horovod = RUNNING.get()
            if horovod is not None:
                for output in horovod.outputs:
                    output.close()
            RUNNING.set(None)

    def custom_config(self, sctx: SerializationContext) -> Optional[Dict[str, Any]]:
        """flyteplugins-spark's ``SparkJob``, its ``sparkConf`` with the task slots ``num_proc`` ranks need where the
        user left them unset (the v1 plugin's ``get_custom``)."""
        custom = super().custom_config(sctx)
        custom["sparkConf"] = horovod_spark_conf(self.plugin_config.spark_conf, self.plugin_config.num_proc)
        return custom


TaskPluginRegistry.register(HorovodSpark, HorovodSparkTask)
