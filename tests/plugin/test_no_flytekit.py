"""What Spark tasks run is pickled by value (``spark_launcher._BY_VALUE``) for executors that have no flytekit: none of
those modules may import flytekit at the top. Checked in a fresh interpreter where flytekit cannot be imported."""

import subprocess
import sys

IMPORT_WITHOUT_FLYTEKIT = """
import importlib.abc, importlib.util, sys, types

class NoFlytekit(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "flytekit":
            raise ImportError(f"{name}: flytekit is not installed here (as on a Spark executor)")
        return None

sys.meta_path.insert(0, NoFlytekit())
# the package without its __init__, which registers the task plugins (and so imports flytekit)
package = types.ModuleType("flytekitplugins.horovod")
package.__path__ = list(importlib.util.find_spec("flytekitplugins.horovod").submodule_search_locations)
sys.modules[package.__name__] = package

from flytekitplugins.horovod import spark_launcher

print(" ".join(module.__name__ for module in spark_launcher._BY_VALUE))
print(" ".join(sorted(name for name in sys.modules if name.split(".")[0] == "flytekit")) or "-")
"""


def test_the_modules_spark_tasks_run_by_value_import_without_flytekit():
    ran = subprocess.run([sys.executable, "-c", IMPORT_WITHOUT_FLYTEKIT], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr[-3000:]
    by_value, flytekit_modules = ran.stdout.splitlines()
    assert "flytekitplugins.horovod.spark_launcher" in by_value.split()
    assert "flytekitplugins.horovod.classify" in by_value.split()
    assert flytekit_modules == "-"


def test_the_check_itself_sees_a_module_that_imports_flytekit():
    """The same interpreter refuses the modules that do import flytekit at the top (the task plugins)."""
    program = IMPORT_WITHOUT_FLYTEKIT.replace("from flytekitplugins.horovod import spark_launcher",
                                              "from flytekitplugins.horovod import errors")
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert ran.returncode != 0 and "flytekit is not installed here" in ran.stderr, ran.stderr[-3000:]
