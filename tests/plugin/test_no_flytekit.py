"""What a rank or a Spark executor runs is ``horovod_flyte_runtime``, shipped to Spark executors by value
(``spark_launcher._BY_VALUE``), which may have no flytekit: nothing in it may import flytekit at the top. Checked in
fresh interpreters where flytekit cannot be imported, down to a rank process's own entry point."""

import os
import pickle
import subprocess
import sys

import cloudpickle

from horovod_flyte_runtime import spark_launcher
from horovod_flyte_runtime.rank import RANK_ENTRY, RankJob
from horovod_flyte_runtime.settings import Horovod
from tests.support.no_flytekit import NO_FLYTEKIT

IMPORT_EXECUTOR = NO_FLYTEKIT + """
import importlib, pkgutil
import horovod_flyte_runtime as executor

for module in pkgutil.iter_modules(executor.__path__, executor.__name__ + "."):
    importlib.import_module(module.name)
print(" ".join(sorted(name for name in sys.modules if name.startswith(executor.__name__ + "."))))
print(" ".join(sorted(name for name in sys.modules if name.split(".")[0] == "flytekit")) or "-")
"""


def _without_flytekit(program: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", program, *args], capture_output=True, text=True, timeout=60)


def test_the_runtime_package_imports_without_flytekit():
    ran = _without_flytekit(IMPORT_EXECUTOR)
    assert ran.returncode == 0, ran.stderr[-3000:]
    modules, flytekit_modules = ran.stdout.splitlines()
    assert {"horovod_flyte_runtime.rank", "horovod_flyte_runtime.spark_barrier_task",
            "horovod_flyte_runtime.classify"} <= set(modules.split())
    assert flytekit_modules == "-"


def test_what_spark_ships_by_value_is_the_runtime_package():
    assert [module.__name__ for module in spark_launcher._BY_VALUE] == ["horovod_flyte_runtime"]


def test_a_rank_runs_its_job_without_flytekit(tmp_path):
    """A rank process's own entry point (``RANK_ENTRY``: ``rank_main``) runs a pickled job and writes its result."""
    job = tmp_path / "job.pkl"
    job.write_bytes(cloudpickle.dumps(RankJob.of(dict, {"answer": 42}, str(tmp_path / "failures"),
                                                 Horovod(framework=None))))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "HOROVOD_", "PMI_"))}
    ran = subprocess.run([sys.executable, "-c", NO_FLYTEKIT + RANK_ENTRY, str(job), str(tmp_path)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "flytekit is not installed here" not in ran.stderr
    result = pickle.loads((tmp_path / "result-0.pkl").read_bytes())
    assert result.value == {"answer": 42}


def test_the_check_itself_sees_a_module_that_imports_flytekit():
    """The same interpreter refuses the modules that do import flytekit at the top (the task plugins)."""
    ran = _without_flytekit(NO_FLYTEKIT + "from flytekitplugins.horovod import errors")
    assert ran.returncode != 0 and "flytekit is not installed here" in ran.stderr, ran.stderr[-3000:]
