"""Ctrl-C while ranks run (MPI and Spark route, Gloo and mpirun) or a plain Spark job runs: the run stops within 5 s
(``pyflyte`` has printed its error and exited: the user's prompt is back), its error's first line says the user
interrupted it (no rank blamed, no Spark or Py4J noise), no process of the run is left 10 s after Ctrl-C (the Spark
driver's JVM runs its shutdown hooks after ``pyflyte`` exits: 0.7 s on an idle machine), and nothing of the job stays
on disk (the pickled function and its arguments, the ranks' sandboxes)."""

import glob
import os
import re
import signal
import subprocess
import threading
import time
import uuid

import pytest

from tests.conftest import ROOT, VENV_BIN, _leftovers

LEFTOVER_PATTERNS = ("horovod-job-*", "horovod-rank-*", "flyte-rank-*", "**/job.pkl")

# fault, stall and liveness timings are what these tests assert: make test runs them alone
pytestmark = pytest.mark.serial


def _tmp_files(folder: str) -> set:
    return {p for pattern in LEFTOVER_PATTERNS for p in glob.glob(os.path.join(folder, pattern), recursive=True)}


# (flows, workflow, what the run prints once it is in the phase to interrupt, how many times)
CASES = [
    ("tests/plugin/flows/mpi_flows.py", "sleeping_wf", "is sleeping", 2),  # MPI route, Gloo: both ranks run the body
    ("tests/plugin/flows/mpi_flows.py", "mpirun_sleeping_wf", "is sleeping", 2),  # MPI route, mpirun
    ("tests/plugin/flows/spark_flows.py", "spark_sleeping_wf", "is sleeping", 2),  # Spark route, Gloo
    ("tests/plugin/flows/spark_flows.py", "spark_mpi_sleeping_wf", "is sleeping", 2),  # Spark route, mpirun
    ("tests/plugin/flows/spark_flows.py", "plain_spark_sleeping_wf", "(0 + 2) / 2]", 1),  # a plain Spark job running
]
NOISE = ("RankLostError", "memory", "Horovod rank", "reentrant call", "Pipe is closed", "Py4J")


@pytest.mark.slow
@pytest.mark.parametrize("flows, workflow, running, times", CASES, ids=[case[1] for case in CASES])
def test_ctrl_c_stops_every_rank_and_leaves_nothing_behind(flows, workflow, running, times, tmp_path):
    marker = f"HVD_TEST_RUN_{uuid.uuid4().hex}"
    tmp = tmp_path / "tmp"  # the run's own TMPDIR: what other runs on this machine leave in /tmp is not this run's
    tmp.mkdir()
    # FLYTE_HOROVOD_VERBOSE=1: every rank's lines on the console, so that the test sees both ranks running
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", marker: "1", "FLYTE_HOROVOD_VERBOSE": "1",
           "COLUMNS": "400", "TMPDIR": str(tmp)}
    # its own process group, as a shell's foreground job: the terminal's Ctrl-C goes to the whole group
    proc = subprocess.Popen([str(VENV_BIN / "pyflyte"), "run", flows, workflow], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "".join(lines).count(running) >= times:  # two ranks' lines may share one line
                break
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        # read while waiting, so a full pipe never holds pyflyte up; to the end of the output, i.e. until the last
        # process that shares it (the JVM, a rank) has ended
        after = []
        reader = threading.Thread(target=lambda: after.extend(proc.stdout), daemon=True)
        reader.start()
        proc.wait(timeout=60)
        seconds = time.monotonic() - started  # pyflyte has exited: the prompt is back
        reader.join(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    output = "".join(lines + after)
    assert proc.returncode != 0, output[-3000:]
    assert seconds < 5, f"stopped {seconds:.1f} s after Ctrl-C:\n{output[-3000:]}"
    # the error's first line (pyflyte's ``Type: message``; no traceback line of Spark or Py4J before it) says so
    errors = [line for line in after if re.match(r"[\w.]+: ", line)]
    assert errors and errors[0].startswith("InterruptedByUser: "), "".join(after)[-3000:]
    assert "interrupted by the user (Ctrl-C)" in "".join(after), "".join(after)[-3000:]
    noise = [word for word in NOISE if word.lower() in "".join(after).lower()]
    assert noise == [], f"{noise} after Ctrl-C:\n{''.join(after)[-3000:]}"
    while _leftovers(marker) and time.monotonic() < started + 10:
        time.sleep(0.1)
    assert _leftovers(marker) == [], f"processes left 10 s after Ctrl-C: {_leftovers(marker)}"
    print(f"{workflow}: pyflyte exited {seconds:.1f} s after Ctrl-C, its last process {time.monotonic() - started:.1f} s")
    assert _tmp_files(str(tmp)) == set()
