"""What the tests, the benchmarks (bench/) and scripts/reliability.py share: the repository's root and running a
command the way a user does; ``tests.support.spark``: the local Spark session of the workflow's tasks;
``tests.support.prepared``: a small prepared-data directory.

Importable without pytest, from any process whose ``sys.path`` holds the repository's root.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


@dataclass
class Ran:
    """A finished command: its exit status, stdout and stderr together, its seconds, and the marker its processes
    carry in their environment (see ``leftovers``)."""

    returncode: int
    output: str
    seconds: float
    marker: str


def user_env(env: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment a user's shell gives a command: this one with the project's venv first on PATH, and wide
    columns (a message is not wrapped); ``env`` on top."""
    return {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "400", **(env or {})}


def run_command(args: List[str], env: Optional[Dict[str, str]] = None, timeout: float = 600,
                cwd: os.PathLike | str = ROOT) -> Ran:
    """Run a command as a user does (``user_env``), its output captured; its process tree is tagged with a marker."""
    marker = f"HVD_TEST_RUN_{uuid.uuid4().hex}"
    start = time.monotonic()
    proc = subprocess.run(args, cwd=cwd, env=user_env({marker: "1", **(env or {})}), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return Ran(proc.returncode, proc.stdout, time.monotonic() - start, marker)


def leftovers(marker: str) -> List[int]:
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
