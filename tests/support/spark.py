"""The local Spark session of the workflow's tasks, for tests and benchmarks."""
from __future__ import annotations

import os
import sys
from typing import Any


def local_spark(app_name: str = "rossmann-tests", **conf: str) -> Any:
    """The session a local run of the workflow's Spark tasks gets: flytekitplugins-spark's local session with the
    workflow's SPARK_CONF, ``conf`` on top (``spark_sql_shuffle_partitions="2"`` for ``spark.sql.shuffle.partitions``).
    Its driver JVM starts with the options a local run's does (``use_quick_start_jvm``; ``SPARK_SUBMIT_OPTS`` is put
    back after, so the commands tests run get this process's environment as it was). Differs in two places: Spark
    logs only errors (quieter output, no effect on what runs), and its Python workers run this venv's Python, as
    HorovodSpark's session's do (``prepare_local_session``): the tests build DataFrames from Python rows, which the
    workflow's tasks (reading files) never do, and Spark's default, ``python3`` on PATH, may be another Python (the
    context's pythonExec decides it for every job started from now on)."""
    from flytekitplugins.spark.task import new_spark_session

    from horovod_flyte_runtime.local_driver import use_quick_start_jvm
    from rossmann.spark_conf import SPARK_CONF

    spark_conf = {**SPARK_CONF, **{k.replace("_", "."): v for k, v in conf.items()}}
    submit_opts = os.environ.get("SPARK_SUBMIT_OPTS")
    use_quick_start_jvm(spark_conf)
    try:
        session = new_spark_session(app_name, spark_conf)
    finally:
        if submit_opts is None:
            os.environ.pop("SPARK_SUBMIT_OPTS", None)
        else:
            os.environ["SPARK_SUBMIT_OPTS"] = submit_opts
    session.sparkContext.setLogLevel("ERROR")
    session.sparkContext.pythonExec = sys.executable
    return session
