"""The forecasting library has no Flyte (the design: ``rossmann/`` is testable without Flyte, and the plugin usable
without ``rossmann/``): every ``rossmann`` module imports in a fresh interpreter where neither flytekit
nor a flytekitplugins package can be imported."""

import subprocess
import sys
from pathlib import Path

import rossmann

IMPORT_ROSSMANN = """
import importlib, importlib.abc, pkgutil, sys

class NoFlyte(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("flytekit", "flytekitplugins"):
            raise ImportError(f"{name}: Flyte is not installed here")
        return None

sys.meta_path.insert(0, NoFlyte())
import rossmann

for module in pkgutil.iter_modules(rossmann.__path__, "rossmann."):
    importlib.import_module(module.name)
print(" ".join(sorted(name for name in sys.modules if name.startswith("rossmann."))))
"""


def test_every_rossmann_module_imports_without_flyte():
    ran = subprocess.run([sys.executable, "-c", IMPORT_ROSSMANN], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-3000:]
    modules = {f"rossmann.{path.stem}" for path in Path(rossmann.__file__).parent.glob("*.py")} - {"rossmann.__init__"}
    assert set(ran.stdout.split()) == modules
