"""The Spark session of a Horovod-on-Spark task, for both plugins (flytekit's ``HorovodSpark`` and Flyte 2's): the
task slots ``num_proc`` ranks need, checked when the config is made, and a local session that fits them.

No flytekit import: the Flyte 2 plugin uses this module.
"""

import math
import os
import sys
from typing import Dict, Optional

from .local_driver import LOOPBACK, set_up_local_driver
from .settings import Horovod, HorovodConfigError, whole_number
from .spark_launcher import spark_slots


def check_horovod_spark(num_proc: object, spark_conf: Dict[str, str], horovod: object) -> None:
    """``HorovodConfigError`` unless ``num_proc`` is a whole number >= 1 that ``spark_conf`` has slots for and
    ``horovod`` is a ``Horovod``: what both plugins' ``HorovodSpark`` check when made."""
    if not whole_number(num_proc, at_least=1):
        raise HorovodConfigError(f"HorovodSpark(num_proc={num_proc!r}): needs a whole number of Horovod ranks, at "
                                 "least one")
    slots = cluster_slots(horovod_spark_conf(spark_conf, num_proc))
    if slots < num_proc:
        raise HorovodConfigError(
            f"HorovodSpark(num_proc={num_proc}) needs {num_proc} Spark task slots at once, but spark_conf gives "
            f"{slots}: {_slot_formula(spark_conf)}; raise spark.executor.instances or spark.executor.cores, or lower "
            "num_proc"
        )
    if not isinstance(horovod, Horovod):
        raise HorovodConfigError(f"HorovodSpark.horovod must be a Horovod(...) settings object, got "
                                 f"{type(horovod).__name__}")


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


def prepare_local_session(num_proc: int, spark_conf: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Get this process ready for a local SparkSession for ``num_proc`` ranks; return its conf (``spark_conf`` first).

    A ``local[N]`` master with a slot per rank, and the driver advertised on the loopback address it is bound to
    (else, where the host name resolves to a loopback address, Spark advertises another interface and cannot fetch
    task results over 1 MB), and no Spark UI (it would listen on every interface). Also makes Spark's Python workers
    run this interpreter (the one with Horovod) rather than ``python3`` on PATH, unless ``PYSPARK_PYTHON`` says
    otherwise: pyspark reads only that variable. No progress bars: they would break into the ranks' lines on the
    console.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = dict(spark_conf or {})
    conf.setdefault("spark.master", f"local[{max(num_proc, os.cpu_count() or 1)}]")
    conf.setdefault("spark.ui.showConsoleProgress", "false")
    if conf["spark.master"].startswith("local"):  # a user's own cluster master keeps Spark's address choice
        conf.setdefault("spark.driver.bindAddress", LOOPBACK)
        conf.setdefault("spark.driver.host", LOOPBACK)
        conf.setdefault("spark.ui.enabled", "false")
        set_up_local_driver(conf)
    return conf


def session_fits(spark, num_proc: int) -> bool:
    """Whether a running local session has a slot per rank, an advertised address it is bound to, and the Python
    workers ``prepare_local_session`` asks for."""
    conf = spark.sparkContext.getConf()
    local = spark.sparkContext.master.startswith("local")
    return (spark_slots(spark) >= num_proc
            and (not local or conf.get("spark.driver.host", "") == conf.get("spark.driver.bindAddress", LOOPBACK))
            and spark.sparkContext.pythonExec == os.environ["PYSPARK_PYTHON"])


def importable_in_workers(spark, python_path: str) -> None:
    """Put ``python_path`` first on the ``PYTHONPATH`` of a local session's Python workers started from now on (Spark
    pools workers by environment), so that they unpickle what the task's module defines as the driver does: e.g. a
    PyTorch model class, which the Estimator's ranks and its model's ``transform`` load."""
    env = spark.sparkContext.environment
    paths = [python_path, *env.get("PYTHONPATH", "").split(os.pathsep)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
