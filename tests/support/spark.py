"""The local Spark session of the workflow's tasks, for tests and benchmarks."""
from __future__ import annotations

from typing import Any


def local_spark(app_name: str = "rossmann-tests", **conf: str) -> Any:
    """The session a local run of the workflow's Spark tasks gets: flytekitplugins-spark's local session with the
    workflow's SPARK_CONF, ``conf`` on top (``spark_sql_shuffle_partitions="2"`` for ``spark.sql.shuffle.partitions``).
    Differs in one place: Spark logs only errors (quieter output, no effect on what runs)."""
    from flytekitplugins.spark.task import new_spark_session

    from workflows.rossmann import SPARK_CONF

    session = new_spark_session(app_name, {**SPARK_CONF, **{k.replace("_", "."): v for k, v in conf.items()}})
    session.sparkContext.setLogLevel("ERROR")
    return session
