"""The plugin as a user installs it into their own stack: ``pip install ./plugins/flytekit-horovod`` into a fresh
virtual environment that already has other versions of flytekit (and pyspark) within the plugin's ranges, then a
2-rank example runs there. These are the bottoms of the ranges in plugins/flytekit-horovod/pyproject.toml; the
tops are this project's pins, which the rest of the suite runs on.

The fresh environment borrows TensorFlow and the Horovod build from this project's environment through a ``.pth``
file (Horovod must be built against the framework, which takes minutes), with the source folder of the editable Flyte 2
plugin, whose borrowed metadata declares a flytekit plugin; everything pip installs in it shadows what is borrowed, so
the versions under test are the ones that run."""

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_command

PLUGIN = ROOT / "plugins" / "flytekit-horovod"
RUNTIME = ROOT / "plugins" / "horovod-flyte-runtime"  # not on PyPI: installed from here beside the plugin
FLOWS = Path(__file__).with_name("example_flows.py")


def _fresh_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    borrowed = Path(sysconfig.get_paths()["purelib"])
    # and the plain folders this environment's own editable installs put on its path (the Flyte 2 plugin's source):
    # their borrowed metadata names a flytekit plugin module there, which `import flytekit` loads
    folders = [line for pth in sorted(borrowed.glob("__editable__.*.pth")) for line in pth.read_text().splitlines()
               if line.strip() and not line.startswith("import ")]
    Path(site, "borrowed-framework.pth").write_text("\n".join([str(borrowed), *folders]) + "\n")
    return python


def _pip(python: Path, *args: str):
    # pip's own cache, as a user's pip keeps it: pyspark is an sdist only, and the wheel pip builds of it (0.4 GB, about
    # half a minute of CPU) is built once per machine, not once per clone
    ran = run_command([str(python), "-m", "pip", "--disable-pip-version-check", "install", *args], timeout=900)
    assert ran.returncode == 0, ran.output[-4000:]
    return ran


# The bottoms differ by Python (plugins/flytekit-horovod/pyproject.toml): on 3.12 every pyspark 3.x fails to import
# (distutils), so pyspark 4.0.0, and flytekitplugins-spark 1.16.4, the first that allows pyspark 4.
PY312 = sys.version_info >= (3, 12)
SPARK_PLUGIN_BOTTOM = "1.16.4" if PY312 else "1.16.0"
PYSPARK_BOTTOM = "4.0.0" if PY312 else "3.4.0"


@pytest.mark.slow
@pytest.mark.heavy  # 1-2 min of installs and builds each: shared by make test's two runs
@pytest.mark.parametrize("pins, workflow", [
    (["flytekit==1.16.0", "flytekitplugins-kfmpi==1.16.0", f"flytekitplugins-spark=={SPARK_PLUGIN_BOTTOM}"], "mpi_wf"),
    ([f"pyspark=={PYSPARK_BOTTOM}"], "spark_wf"),
], ids=["flytekit-1.16.0", f"pyspark-{PYSPARK_BOTTOM}"])
def test_pip_install_into_a_stack_of_other_versions_and_run_two_ranks(tmp_path, pins, workflow):
    python = _fresh_venv(tmp_path / "venv")
    _pip(python, *pins)
    installed = _pip(python, str(RUNTIME), str(PLUGIN))
    assert "Successfully installed flytekitplugins-horovod" in installed.output, installed.output[-2000:]
    for pin in pins:  # pip kept the stack's versions: they are within the plugin's ranges
        name, version = pin.split("==")
        shown = run_command([str(python), "-m", "pip", "show", name]).output
        assert re.search(rf"^Version: {re.escape(version)}$", shown, re.M), shown
    env = {"PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}
    pyflyte = [str(python), "-c", "from flytekit.clis.sdk_in_container.pyflyte import main; main()", "run"]
    seen = run_command([*pyflyte, str(FLOWS), "versions_wf"], env=env, cwd=tmp_path)
    assert seen.returncode == 0, seen.output[-3000:]
    assert all(pin.split("==")[1] in seen.output.strip().splitlines()[-1] for pin in pins if "flytekitplugins" not in pin)
    ran = run_command([*pyflyte, str(FLOWS), workflow], env=env, cwd=tmp_path, timeout=600)
    assert ran.returncode == 0, ran.output[-4000:]
    assert ran.output.strip().splitlines()[-1] == "3.0", ran.output[-2000:]
