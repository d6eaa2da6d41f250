"""A local run's plain flyteplugins-spark task gets the session a v1 local run's Spark task gets.

flyteplugins-spark's local session takes Spark's defaults and drops the task's ``spark_conf`` (200 shuffle
partitions, a 1 GB driver, Spark's progress bars and start-up lines), where flytekitplugins-spark's is made with it.
Where this plugin is imported, a local run's plain ``Spark`` task first starts the session with its ``spark_conf``
and the driver on loopback, as flytekitplugins-spark does, its JVM quick and quiet as the v1 plugin starts it
(``horovod_flyte_runtime.local_driver``); flyteplugins-spark then gets that session. On a cluster nothing changes:
the Spark operator starts the driver with the task's ``sparkConf``.
"""

import functools
from typing import Any, Callable, Dict

from flyte._context import internal_ctx
from flyteplugins.spark.task import DEFAULT_SPARK_CONTEXT_NAME, PysparkFunctionTask

from horovod_flyte_runtime.local_driver import LOOPBACK, set_up_local_driver


def local_session(conf: Dict[str, str]) -> Any:
    """The process's SparkSession, started with ``conf`` where none runs yet."""
    import pyspark

    builder = pyspark.sql.SparkSession.builder.appName(DEFAULT_SPARK_CONTEXT_NAME)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def in_local_run() -> bool:
    task = internal_ctx().data.task_context
    return task is None or task.mode == "local"


def _starts_the_local_session(pre: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(pre)
    async def wrapper(self, *args, **kwargs):
        if in_local_run():
            conf = {"spark.driver.bindAddress": LOOPBACK, **(self.plugin_config.spark_conf or {})}
            set_up_local_driver(conf)
            local_session(conf)
        return await pre(self, *args, **kwargs)

    return wrapper


PysparkFunctionTask.pre = _starts_the_local_session(PysparkFunctionTask.pre)
