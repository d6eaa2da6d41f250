"""Ctrl-C while ranks run: the run says what it stopped, no process is left, and nothing of the job stays on disk
(the pickled function and its arguments, the ranks' sandboxes)."""

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from tests.conftest import ROOT, VENV_BIN, _leftovers

LEFTOVER_PATTERNS = ("horovod-job-*", "horovod-rank-*", "flyte-rank-*", "**/job.pkl")


def _tmp_files() -> set:
    return {p for pattern in LEFTOVER_PATTERNS for p in glob.glob(os.path.join(tempfile.gettempdir(), pattern),
                                                                      recursive=True)}


@pytest.mark.slow
@pytest.mark.parametrize("flows, workflow", [("tests/plugin/flows/mpi_flows.py", "sleeping_wf"),
                                             ("tests/plugin/flows/spark_flows.py", "spark_sleeping_wf")])
def test_ctrl_c_stops_every_rank_and_leaves_nothing_behind(flows, workflow):
    marker = f"HVD_TEST_RUN_{uuid.uuid4().hex}"
    before = _tmp_files()
    # FLYTE_HOROVOD_VERBOSE=1: every rank's lines on the console, so that the test sees both ranks running
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", marker: "1", "FLYTE_HOROVOD_VERBOSE": "1"}
    # its own process group, as a shell's foreground job: the terminal's Ctrl-C goes to the whole group
    proc = subprocess.Popen([str(VENV_BIN / "pyflyte"), "run", flows, workflow], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if sum("is sleeping" in seen for seen in lines) == 2:  # both ranks are running the body
                break
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        lines += proc.stdout.readlines()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    output = "".join(lines)
    assert proc.returncode != 0, output[-3000:]
    assert time.monotonic() - started < 30, output[-3000:]
    assert "interrupted" in output.lower(), output[-3000:]  # the run says it was interrupted, not a silent exit 1
    time.sleep(1)
    assert _leftovers(marker) == [], f"processes left: {_leftovers(marker)}"
    assert _tmp_files() - before == set()
