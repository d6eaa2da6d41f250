"""The Spark driver of a local run, started quick and quiet: what ``pyflyte run`` of any Spark task starts (a plain
flytekitplugins-spark one too, as the first task of a workflow often is) and ``HorovodRunner`` outside Flyte.

Spark's driver JVM reads its options, logging set-up and address once, when it starts: from ``SPARK_SUBMIT_OPTS`` and
``SPARK_LOCAL_IP``. Set here, before the first local session: ``QUICK_START_JVM_OPTIONS`` (a local run is small
jobs for seconds to minutes; docs/spark-route.md has the rule and the figures), each unless the user's own JVM
options make that choice, and the class archive where it is made (``class_archive``); the address Spark binds a
local driver to, where unset (flytekitplugins-spark binds it to 127.0.0.1, and without the variable Spark warns that
the host name "resolves to a loopback address" and advertises another one); and ``log4j2-local.properties``
(Spark's defaults less the lines a local run always prints and no one can act on). The native start-up lines of the
JVM and of TensorFlow (in the driver, the Python workers and the ranks) are filtered from here on (``native_lines``).
``FLYTE_HOROVOD_VERBOSE=1`` leaves the logging and those lines as they are.
"""

import functools
import os
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

from .class_archive import CACHE, SILENT, archive_options
from .native_lines import filter_native_stderr
from .noise import verbose

LOOPBACK = "127.0.0.1"
LOG4J_FILE = Path(__file__).with_name("log4j2-local.properties")
# each quick-start option, and what in the user's own JVM options already makes its choice (two collectors chosen at
# once stop the JVM from starting; a repeated JIT option is harmless, but the user's choice stands)
QUICK_START_JVM_OPTIONS = {"-XX:TieredStopAtLevel=1": re.compile(r"-XX:(TieredStopAtLevel=|[+-]TieredCompilation\b)"),
                           "-XX:+UseSerialGC": re.compile(r"-XX:[+-]Use\w*GC\b")}
JAVA_OPTION_VARIABLES = ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")
DRIVER_JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.driver.defaultJavaOptions")


def set_up_local_driver(spark_conf: Mapping[str, str]) -> None:
    """Make the Spark driver JVM this process starts from now on, with ``spark_conf``, start quickly and bind to
    loopback quietly (see the module doc)."""
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    use_quick_start_jvm(spark_conf)
    if verbose():
        return
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "log4j2.configurationFile" not in options:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{options} -Dlog4j2.configurationFile=file:{LOG4J_FILE}".strip()
    # pyspark 4 on pandas 3: a FutureWarning at the session's start that nothing in a task can act on
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    filter_native_stderr()  # the JVM's and TensorFlow's start-up notices, here and in the workers and ranks


def use_quick_start_jvm(spark_conf: Mapping[str, str]) -> None:
    """Put each of ``QUICK_START_JVM_OPTIONS`` in ``SPARK_SUBMIT_OPTS``, for the driver JVM this process starts from now
    on with ``spark_conf``, unless ``SPARK_SUBMIT_OPTS``, Java's own option variables or ``spark_conf``'s driver Java
    options already make its choice; and the options that map the class archive, where it is made and fits
    (``class_archive``)."""
    submit = os.environ.get("SPARK_SUBMIT_OPTS", "")
    ours = [*QUICK_START_JVM_OPTIONS, *SILENT]  # set by an earlier call, for a conf that may have differed
    earlier = rf"{'|'.join(map(re.escape, ours))}|-XX:SharedArchiveFile={re.escape(str(CACHE))}\S*"
    submit = re.sub(rf"(^|\s)({earlier})(?=\s|$)", "", submit)
    users = " ".join([submit, *(os.environ.get(name, "") for name in JAVA_OPTION_VARIABLES),
                      *(spark_conf.get(key, "") for key in DRIVER_JAVA_OPTIONS)])
    chosen = [option for option, choice in QUICK_START_JVM_OPTIONS.items() if not choice.search(users)]
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join([submit.strip(), *chosen, *archive_options(spark_conf, users)]).strip()


def sets_up_local_driver(pre_execute: Callable[..., Any]) -> Callable[..., Any]:
    """A Spark task's ``pre_execute`` (which starts the session) that first calls ``set_up_local_driver`` in a local
    run; on a cluster the driver is started before the task runs."""
    from flytekit import FlyteContextManager
    from flytekit.extend import ExecutionState

    @functools.wraps(pre_execute)
    def wrapper(self, user_params):
        state = FlyteContextManager.current_context().execution_state
        if not (state and state.mode == ExecutionState.Mode.TASK_EXECUTION):
            set_up_local_driver(self.task_config.spark_conf or {})
        return pre_execute(self, user_params)

    return wrapper
