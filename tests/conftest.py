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


def hostname_resolves_to_loopback() -> bool:
    import socket

    try:
        return socket.gethostbyname(socket.gethostname()).startswith("127.")
    except OSError:
        return False


def on_loopback_hostname(args: List[str], tmp_path: Path) -> List[str]:
    """``args`` run where the host name resolves to a loopback address (Debian's default /etc/hosts line
    ``127.0.1.1 <hostname>``): as is where it already does, else in a private mount namespace whose /etc/hosts says so."""
    import socket

    if hostname_resolves_to_loopback():
        return args
    if os.geteuid() != 0:
        pytest.skip("needs root (unshare --mount) to give this machine's host name a loopback address")
    hosts = tmp_path / "hosts"
    hosts.write_text(Path("/etc/hosts").read_text() + f"\n127.0.1.1 {socket.gethostname()}\n")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts), *args]


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

    def run(path: str, workflow: str, *args: str, env: Optional[Dict[str, str]] = None, timeout: float = 600,
            wrap=lambda command: command) -> Ran:
        ran = run_command(wrap([str(VENV_BIN / "pyflyte"), "run", path, workflow, *args]), env=env, timeout=timeout)
        runs.append(ran)
        return ran

    yield run
    for ran in runs:
        time.sleep(0.5)
        assert _leftovers(ran.marker) == [], f"processes left running after the run: {_leftovers(ran.marker)}"


@pytest.fixture
def leftovers():
    return _leftovers
