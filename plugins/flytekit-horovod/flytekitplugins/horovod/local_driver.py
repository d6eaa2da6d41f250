"""The Spark driver of a local run, started quiet: what ``pyflyte run`` of any Spark task starts (a plain
flytekitplugins-spark one too, as the first task of a workflow often is) and ``HorovodRunner`` outside Flyte.

Spark's driver JVM reads its logging set-up and its address once, when it starts: from ``SPARK_SUBMIT_OPTS`` and
``SPARK_LOCAL_IP``. Set here, where unset, before the first local session: the address Spark binds a local driver to
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


def quiet_local_driver() -> None:
    """Make the Spark driver JVM this process starts from now on bind to loopback quietly (see the module doc)."""
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    if verbose():
        return
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "log4j2.configurationFile" not in options:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{options} -Dlog4j2.configurationFile=file:{LOG4J_FILE}".strip()
    # pyspark 4 on pandas 3: a FutureWarning at the session's start that nothing in a task can act on
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    filter_native_stderr()  # the JVM's and TensorFlow's start-up notices, here and in the workers and ranks


def quiet_in_local_runs(pre_execute: Callable[..., Any]) -> Callable[..., Any]:
    """A Spark task's ``pre_execute`` (which starts the session) that first calls ``quiet_local_driver`` in a local
    run; on a cluster the driver is started before the task runs."""
    from flytekit import FlyteContextManager
    from flytekit.extend import ExecutionState

    @functools.wraps(pre_execute)
    def wrapper(self, user_params):
        state = FlyteContextManager.current_context().execution_state
        if not (state and state.mode == ExecutionState.Mode.TASK_EXECUTION):
            quiet_local_driver()
        return pre_execute(self, user_params)

    return wrapper
