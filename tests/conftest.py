"""Shared test helpers: run real commands (pyflyte, mpirun) the way a user or a cluster would."""

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


@dataclass
class Ran:
    returncode: int
    output: str
    seconds: float
    marker: str


def _leftovers(marker: str) -> List[int]:
    """Pids of processes still carrying this run's marker in their environment."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def run_command(args: List[str], env: Optional[Dict[str, str]] = None, timeout: float = 600, cwd=ROOT) -> Ran:
    """Run a command with the project's venv first on PATH; tag its process tree with a marker."""
    marker = f"HVD_TEST_RUN_{uuid.uuid4().hex}"
    full_env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", marker: "1", "COLUMNS": "400", **(env or {})}
    start = time.monotonic()
    proc = subprocess.run(args, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    return Ran(proc.returncode, proc.stdout, time.monotonic() - start, marker)


@pytest.fixture
def pyflyte_run():
    """``pyflyte run <file> <workflow> [args]`` as a user types it; asserts no process of it is left behind."""
    runs = []

    def run(path: str, workflow: str, *args: str, env: Optional[Dict[str, str]] = None, timeout: float = 600) -> Ran:
        ran = run_command([str(VENV_BIN / "pyflyte"), "run", path, workflow, *args], env=env, timeout=timeout)
        runs.append(ran)
        return ran

    yield run
    for ran in runs:
        time.sleep(0.5)
        assert _leftovers(ran.marker) == [], f"processes left running after the run: {_leftovers(ran.marker)}"


@pytest.fixture
def leftovers():
    return _leftovers
