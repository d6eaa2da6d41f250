"""The Spark driver of a local run, started quick and quiet: what ``pyflyte run`` of any Spark task starts (a plain
flytekitplugins-spark one too, as the first task of a workflow often is) and ``HorovodRunner`` outside Flyte.

Spark's driver JVM reads its options, logging set-up and address once, when it starts: from ``SPARK_SUBMIT_OPTS`` and
``SPARK_LOCAL_IP``. Set here, where unset, before the first local session: JVM options for a short-lived driver
(``QUICK_START_JVM``: the quick JIT tier only and the serial collector; a local run is seconds to minutes of small
jobs, where the JVM's optimising compiler and parallel collector threads cost more than they win: the Rossmann
``prepare`` task 40 s -> 30 s, the driver's CPU time 90 -> 50 s on 2 cores; a user's own ``-XX:`` option in
``SPARK_SUBMIT_OPTS`` leaves the JVM's defaults as they are; on a cluster the operator starts the driver and none of
this applies), the address Spark binds a local driver to
(flytekitplugins-spark binds it to 127.0.0.1, and without the variable Spark warns that the host name "resolves to a
loopback address" and advertises another one), and ``log4j2-local.properties`` (Spark's defaults less the lines a
local run always prints and no one can act on). The native start-up lines of the JVM and of TensorFlow (in the driver,
the Python workers and the ranks) are filtered from here on (``executor.native_lines``). ``FLYTE_HOROVOD_VERBOSE=1``
leaves all of it as it is.
"""

import functools
import os
import warnings
from pathlib import Path
from typing import Any, Callable

from .executor.native_lines import filter_native_stderr
from .executor.noise import verbose

LOOPBACK = "127.0.0.1"
LOG4J_FILE = Path(__file__).with_name("log4j2-local.properties")
QUICK_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def set_up_local_driver() -> None:
    """Make the Spark driver JVM this process starts from now on start quickly and bind to loopback quietly (see the
    module doc)."""
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    start_jvm_quickly()
    if verbose():
        return
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "log4j2.configurationFile" not in options:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{options} -Dlog4j2.configurationFile=file:{LOG4J_FILE}".strip()
    # pyspark 4 on pandas 3: a FutureWarning at the session's start that nothing in a task can act on
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    filter_native_stderr()  # the JVM's and TensorFlow's start-up notices, here and in the workers and ranks


def start_jvm_quickly() -> None:
    """Start the Spark driver JVM this process starts from now on with ``QUICK_START_JVM``, unless
    ``SPARK_SUBMIT_OPTS`` already has a ``-XX:`` option of the user's."""
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "-XX:" not in options:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{options} {QUICK_START_JVM}".strip()


def set_up_in_local_runs(pre_execute: Callable[..., Any]) -> Callable[..., Any]:
    """A Spark task's ``pre_execute`` (which starts the session) that first calls ``set_up_local_driver`` in a local
    run; on a cluster the driver is started before the task runs."""
    from flytekit import FlyteContextManager
    from flytekit.extend import ExecutionState

    @functools.wraps(pre_execute)
    def wrapper(self, user_params):
        state = FlyteContextManager.current_context().execution_state
        if not (state and state.mode == ExecutionState.Mode.TASK_EXECUTION):
            set_up_local_driver()
        return pre_execute(self, user_params)

    return wrapper
