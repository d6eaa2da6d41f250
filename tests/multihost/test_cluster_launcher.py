"""A rank SIGKILLed on a cluster: the launcher owns the task's error.

The registered launcher command of a ``replicas=2, slots=2`` MPIJob runs in host a as the training-operator runs it
(its hostfile says ``slots=1`` for hosts b and c, as for every MPIJob propeller v1.16.8 builds; ``OMPI_MCA_*``
variables; the rsh agent), so 4 ranks run, 2 in each worker host. Rank 3 (in host c) is killed with SIGKILL, as the
OOM killer does. ``mpirun``/``horovodrun`` then exit non-zero, which on a cluster fails the MPIJob with only "Job
failed" (propeller reads ``error.pb`` only from a job that succeeded); so the launcher must write the task's
``error.pb`` itself, naming rank 3 and host c, recoverable, and exit 0.
"""

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from flyteidl.core import errors_pb2

from tests.cluster.backend import Attempt
from tests.multihost.checks import rank_markers
from tests.multihost.test_faults import STEPS, _kill_jobs, _launch, _task_error, _wait

pytestmark = [pytest.mark.multihost, pytest.mark.slow]


@pytest.mark.parametrize("task, how", [
    ("mpi_train_2x2", "was killed by SIGKILL (reported by mpirun)"),
    # horovodrun starts remote ranks with ssh, which exits 255 for a remote command killed by a signal
    ("gloo_train_2x2", "exited with status 255 (horovodrun ran it over ssh"),
])
def test_a_killed_rank_is_the_task_error_the_launcher_writes(network, registration, agent, tmp_path, task, how):
    template = registration.task(f"tests.multihost.flows.multihost_flows.{task}")
    attempt = Attempt(tmp_path / "attempt")
    markers = tmp_path / "markers"
    attempt.write_inputs(template, {"marker_dir": str(markers), "steps": STEPS})
    b, c = network["b"], network["c"]

    pool = ThreadPoolExecutor(1)
    job = pool.submit(_launch, network, agent, template, attempt, tmp_path, timeout=600)
    try:
        _wait(lambda: len(rank_markers(markers)) == 4 or job.done(), 240, "4 ranks to start training")
        assert not job.done(), _task_error(attempt, job.result())
        marks = rank_markers(markers)
        assert sorted(m["hostname"] for m in marks.values()) == sorted([b.name, b.name, c.name, c.name]), marks
        assert marks[3]["hostname"] == c.name, marks  # each host's slots in turn: ranks 2 and 3 in host c
        time.sleep(1)  # a few steps in
        killed = time.time()
        os.kill(marks[3]["pid"], signal.SIGKILL)
        ran = job.result(timeout=120)
    finally:
        if not job.done():
            _kill_jobs(network)
        pool.shutdown()

    assert ran.returncode == 0, ran.output[-5000:]  # the launcher pod succeeds, so propeller reads error.pb
    assert sorted(os.listdir(attempt.output_prefix)) == ["error.pb"], ran.output[-5000:]
    error = errors_pb2.ErrorDocument.FromString((Path(attempt.output_prefix) / "error.pb").read_bytes()).error
    assert error.kind == errors_pb2.ContainerError.RECOVERABLE, error.message  # Flyte's retries apply
    assert f"Horovod rank 3 died on host {c.name}" in error.message and how in error.message, error.message
    print(f"{task}: {error.message.split('Message:')[-1].strip()}")
    assert killed - 1 <= error.timestamp.seconds <= time.time(), (killed, error.timestamp)
