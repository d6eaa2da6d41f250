"""A plain flyteplugins-spark task in a Flyte 2 file that uses this plugin: what its local session got."""

import json

import flyte
from flyteplugins.spark.task import Spark

import flyteplugins.horovod  # noqa: F401  (the plugin, as a file with Horovod tasks imports it)

CONF = {"spark.sql.shuffle.partitions": "7", "spark.driver.memory": "2g", "spark.ui.enabled": "false"}
spark_env = flyte.TaskEnvironment(name="plain_spark", plugin_config=Spark(spark_conf=CONF))


@spark_env.task
def session_settings(out: str) -> str:
    """The session's settings and its driver JVM's options, as JSON in the file ``out``."""
    spark = flyte.ctx().data["spark_session"]  # flyteplugins-spark's
    conf = spark.sparkContext.getConf()
    jvm = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    settings = json.dumps({"partitions": spark.conf.get("spark.sql.shuffle.partitions"),
                       "driver_memory": conf.get("spark.driver.memory"), "ui": conf.get("spark.ui.enabled"),
                       "bind_address": conf.get("spark.driver.bindAddress"), "jvm": [str(a) for a in jvm]})
    with open(out, "w") as file:
        file.write(settings)
    return out
