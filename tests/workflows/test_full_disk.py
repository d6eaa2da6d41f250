"""A full disk, as a user meets it: ``pyflyte run`` of ``prepare`` and ``train`` with a 1 MB tmpfs as TMPDIR (where
flytekit puts a local run's working directory). The error's first line names "No space left on device" and the path,
the class is a recoverable one (a retry elsewhere may succeed), and no half-written output is left.

Root only (mounting a tmpfs), as CI runs.
"""

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from rossmann import synthetic
from tests.support import ROOT, VENV_BIN, user_env
from tests.support.prepared import make_prepared

PYFLYTE = [str(VENV_BIN / "pyflyte"), "run", "workflows/rossmann.py"]
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs (a full disk) needs root")]


@pytest.fixture
def full_disk():
    """A 1 MB tmpfs, unmounted whatever happens."""
    yield from _tmpfs("1m")


@pytest.fixture
def fuller_disk():
    """A 256 KB tmpfs (smaller than the prepared tiny data), unmounted whatever happens."""
    yield from _tmpfs("256k")


def _tmpfs(size: str):
    path = Path(tempfile.mkdtemp(prefix="full-disk-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data")
    synthetic.generate(str(out), n_stores=4, start="2015-01-01", end="2015-07-31", seed=0)
    return out


def _run(args, tmpdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(PYFLYTE + args, env=user_env({"TMPDIR": str(tmpdir)}), capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


def _first_line(ran: subprocess.CompletedProcess) -> tuple:
    """(error class, first line of its message) of the task's error as pyflyte prints it."""
    assert ran.returncode != 0, ran.stdout[-3000:]
    output = ran.stdout + ran.stderr
    found = re.search(r"^(\w+): Error encountered while executing '[\w.]+':\s*\n\s*(.+)$", output, re.M)
    assert found, output[-4000:]
    return found.group(1), found.group(2)


def _outputs_left(disk: Path, name: str) -> list:
    return [p for p in disk.rglob(name) if p.is_dir() and any(p.iterdir())]


def test_a_full_disk_in_train_names_the_path_is_recoverable_and_leaves_no_model(full_disk, tmp_path):
    # prepared data of prepare's layout, written without a Spark run (train is the task under test)
    prepared = make_prepared(tmp_path / "prepared", stores=4, train_days=120)
    ran = _run(["train", "--prepared", str(prepared), "--hp", '{"epochs": 2}'], full_disk)
    error, line = _first_line(ran)
    assert error == "DiskFullError", line  # a FlyteRecoverableException: Flyte's retries may run it elsewhere
    assert re.match(rf"No space left on device: {re.escape(str(full_disk))}/\S+/horovod/scratch/", line), line
    assert "rank 0" in line and not _outputs_left(full_disk, "model")


def test_a_full_disk_in_prepare_names_the_path_and_leaves_no_prepared_data(data, fuller_disk):
    ran = _run(["prepare", "--data", str(data), "--hp", "{}"], fuller_disk)
    error, line = _first_line(ran)
    assert error == "DiskFullError", line
    assert re.match(rf"No space left on device: {re.escape(str(fuller_disk))}/\S+ \(written by the task\)", line), line
    assert not _outputs_left(fuller_disk, "prepared") and not list(fuller_disk.rglob(".prepared.tmp-*"))
