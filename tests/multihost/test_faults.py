"""Skewed and failing starts across hosts, made the way they happen on a cluster.

Skew: one worker host is slow, not the plugin. Its Python starts 10 s late (a ``sitecustomize`` that sleeps, in
that host's environment only: its pod's for ``mpirun`` ranks, its Spark worker's for Spark tasks), or the
launcher's ssh to it takes 10 s more (host a's ssh client config; ``horovodrun`` gives the ranks the launcher's
environment, so a host's own Python settings do not reach them). The job must still succeed.

Failure: a worker host's cable is pulled (its bridge port set down) mid-training. The task must fail within 60 s
with an error naming the rank and the host, and leave no process on any host.
"""

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor, TimeoutError
from pathlib import Path
from typing import Optional

import pytest
from flyteidl.core import errors_pb2

from tests.cluster.backend import Attempt, mpi_launcher, value
from tests.multihost.checks import assert_ranks_across_hosts, rank_markers
from tests.multihost.conftest import FLOWS, IMAGE_ENV, SLOW_PYTHON, pod_env, run_driver, worker_pods
from tests.multihost.flows.multihost_flows import PAYLOAD, STEP_PAYLOAD
from tests.multihost.observe import Observer

pytestmark = [pytest.mark.multihost, pytest.mark.slow]

SKEW = 10.0  # seconds: how late the slow host's rank starts
FAIL_WITHIN = 60.0
STEPS = 1200  # training steps of about 0.1 s: far longer than the test waits for the failure
SLOW_ENV = {"PYTHONPATH": f"{SLOW_PYTHON}:{IMAGE_ENV['PYTHONPATH']}"}


@pytest.fixture
def slow_ssh_to_c(network):
    """Host a's ssh client takes SKEW s more to reach host c (a ``Match exec`` that sleeps first)."""
    config = network["a"].etc / "ssh" / "ssh_config"
    original = config.read_text()
    config.write_text(f'Match host {network["c"].name},{network["c"].address} exec "sleep {SKEW:g}"\n' + original)
    yield
    config.write_text(original)


@pytest.fixture
def slow_spark_worker_c(network, spark_cluster):
    """Host c's Spark worker (so its executors and their Python) with the slow Python, then back to normal."""
    spark_cluster.restart_worker(network["c"], SLOW_ENV)
    yield
    spark_cluster.restart_worker(network["c"])


def _launch(network, agent, template, attempt, workdir, env_c=None, timeout=180):
    """The launcher in host a, ranks in b and c (each with its pod environment, c's optionally changed)."""
    env = pod_env(template, attempt, {})
    with worker_pods(network, {"b": env, "c": {**env, **(env_c or {})}}, workdir):
        return mpi_launcher(template, attempt, workdir, extra_env={"OMPI_MCA_plm_rsh_agent": str(agent)},
                            workers=[network["b"].name, network["c"].name], on=network["a"].command([]),
                            timeout=timeout)


def _assert_c_started_late(network, markers: Path, when: str) -> None:
    """Host c's rank got going SKEW s after host b's: its process ``started`` SKEW s later; or (``imported``: both
    processes start together and c's Python sleeps first) c's process took SKEW s from its start to importing the
    task and b's less; or (``forked``: the Spark route, where a rank descends from its executor's pyspark daemon,
    the Python that sleeps) c's daemon took SKEW s from its start to forking the rank's Python worker and b's less.
    The last two are measured within each host's processes: under load b's imports alone can take 1.5 s more than
    c's (seen in CI), which shrinks the gap between the two hosts' times though c's Python still slept."""
    by_host = {m["hostname"]: m for m in rank_markers(markers).values()}
    c, b = by_host[network["c"].name], by_host[network["b"].name]
    if when == "started":
        gap = c["started"] - b["started"]
        assert gap >= SKEW - 1, f"host c's rank started {gap:.1f} s after host b's"
        return
    took = _daemon_to_worker if when == "forked" else lambda m: m["imported"] - m["started"]
    c_took, b_took = took(c), took(b)
    assert c_took >= SKEW > b_took, f"{when}: host c's rank {c_took:.1f} s, host b's {b_took:.1f} s"


def _daemon_to_worker(marker) -> float:
    """Seconds from the start of the pyspark daemon a rank descends from to its fork of the rank's Python worker
    (which has the daemon's command line too: the nearest of those is the worker, the farthest the daemon)."""
    forked = [started for started, command in marker["lineage"] if "pyspark.daemon" in command]
    assert len(forked) >= 2, f"no pyspark daemon and worker in the rank's lineage: {marker['lineage']}"
    return forked[0] - forked[-1]


@pytest.mark.parametrize("task, slow", [("mpi_2x1", "python"), ("gloo_2x1", "ssh")])
def test_mpi_route_rank_starting_10s_late_still_joins(network, registration, agent, tmp_path, request, task, slow):
    template = registration.task(f"{FLOWS}.{task}")
    attempt = Attempt(tmp_path / "attempt")
    markers = tmp_path / "markers"
    attempt.write_inputs(template, {"marker_dir": str(markers)})
    env_c = {"PYTHONPATH": f"{SLOW_PYTHON}:{pod_env(template, attempt, {})['PYTHONPATH']}"} if slow == "python" else {}
    if slow == "ssh":
        request.getfixturevalue("slow_ssh_to_c")

    with Observer(network.hosts) as seen:
        ran = _launch(network, agent, template, attempt, tmp_path, env_c)
    assert ran.returncode == 0, ran.output[-5000:]
    assert value(attempt.outputs()["total"]) == 3.0
    assert_ranks_across_hosts(seen, network, 2, ["b", "c"], rendezvous="a", controller=task.split("_")[0],
                              payload_bytes=PAYLOAD * 4)
    _assert_c_started_late(network, markers, "imported" if slow == "python" else "started")


def test_spark_route_task_starting_10s_late_still_joins(network, registration, spark_cluster, slow_spark_worker_c,
                                                         tmp_path):
    template = registration.task(f"{FLOWS}.spark_allreduce")
    attempt = Attempt(tmp_path / "attempt")
    markers = tmp_path / "markers"
    attempt.write_inputs(template, {"marker_dir": str(markers)})
    with Observer(network.hosts) as seen:
        ran = run_driver(template, attempt, tmp_path, network, spark_cluster)
    assert ran.returncode == 0 and "error.pb" not in os.listdir(attempt.output_prefix), _task_error(attempt, ran)
    assert value(attempt.outputs()["o0"]) == [3.0, 3.0]
    assert_ranks_across_hosts(seen, network, 2, ["b", "c"], rendezvous="a", controller="gloo", payload_bytes=PAYLOAD * 4)
    _assert_c_started_late(network, markers, "forked")  # its executor's Python started late


@pytest.mark.parametrize("route", ["mpi_train", "gloo_train", "spark_train"])
def test_a_host_losing_its_link_fails_the_task_within_60s_naming_rank_and_host(network, registration, agent,
                                                                               request, tmp_path, route):
    template = registration.task(f"{FLOWS}.{route}")
    attempt = Attempt(tmp_path / "attempt")
    markers = tmp_path / "markers"
    attempt.write_inputs(template, {"marker_dir": str(markers), "steps": STEPS})
    c = network["c"]
    if route == "spark_train":
        start = (run_driver, template, attempt, tmp_path, network, request.getfixturevalue("spark_cluster"))
    else:
        start = (_launch, network, agent, template, attempt, tmp_path)

    pool = ThreadPoolExecutor(1)
    with Observer(network.hosts) as seen:  # stops after the finally below, once host c is back
        job = pool.submit(*start, timeout=600)  # bounded below, by FAIL_WITHIN
        try:
            _wait(lambda: len(rank_markers(markers)) == 2 or job.done(), 180, "both ranks to start training")
            assert not job.done(), _task_error(attempt, job.result())
            time.sleep(2)  # a few steps in
            network.set_link("c", up=False)
            cut = time.monotonic()
            try:
                ran = job.result(timeout=FAIL_WITHIN + 15)
            except TimeoutError:
                running = {n: h.job_processes() for n, h in network.hosts.items()}
                _kill_jobs(network)
                pytest.fail(f"the task was still running {time.monotonic() - cut:.0f} s after host c's link went down; "
                            f"running then: {running}\n{_task_error(attempt, job.result())}")
            failed_after = time.monotonic() - cut
            # what the task started in the hosts it can still reach ends with it (Spark's workers stop the executors)
            reachable = [network["a"], network["b"]]
            _wait(lambda: not any(h.job_processes() for h in reachable), 15,
                  lambda: f"no process left in hosts a and b: {[h.job_processes() for h in reachable]}")
        finally:
            if not job.done():
                _kill_jobs(network)
            network.set_link("c", up=True)
            pool.shutdown()

    # before the cut, the ranks trained across hosts b and c: at least ten steps' gradients left each of them
    assert_ranks_across_hosts(seen, network, 2, ["b", "c"], rendezvous="a",
                              controller="mpi" if route == "mpi_train" else "gloo", payload_bytes=STEP_PAYLOAD * 4 * 10)
    error = _error_document(attempt)
    assert failed_after <= FAIL_WITHIN, f"the task failed {failed_after:.0f} s after the link went down:\n{error}"
    assert error is not None, f"the task failed without an error document: {_task_error(attempt, ran)}"
    print(f"{route}: failed {failed_after:.1f} s after host c's link went down")
    kind = errors_pb2.ErrorDocument.FromString((Path(attempt.output_prefix) / "error.pb").read_bytes()).error.kind
    assert kind == errors_pb2.ContainerError.RECOVERABLE, f"a lost host is a failure Flyte's retries may fix:\n{error}"
    rank_c = next(r for r, m in rank_markers(markers).items() if m["hostname"] == c.name)
    assert re.search(rf"\brank {rank_c}\b", error, re.IGNORECASE) and (c.name in error or c.address in error), \
        f"the error does not name rank {rank_c} and host {c.name} ({c.address}):\n{error}"
    _wait(lambda: not c.job_processes(), 30, lambda: f"host c's processes to end once its link is back: "
                                                     f"{c.job_processes()}")


def _error_document(attempt: Attempt) -> Optional[str]:
    """The error Flyte shows for the task: the message of the error document in its output prefix."""
    path = Path(attempt.output_prefix) / "error.pb"
    return errors_pb2.ErrorDocument.FromString(path.read_bytes()).error.message if path.exists() else None


def _task_error(attempt: Attempt, ran) -> str:
    """The task's error document, else the pod command's exit status and last output."""
    error = _error_document(attempt)
    if error is not None:
        return error
    return f"no error.pb; the pod command exited {ran.returncode}:\n{ran.output[-4000:]}"


def _kill_jobs(network) -> None:
    for host in network.hosts.values():
        for line in host.job_processes():
            try:
                os.kill(int(line.split()[0]), 9)
            except ProcessLookupError:
                pass


def _wait(condition, timeout: float, what) -> None:
    """Wait for ``condition``; ``what`` (text, or a function giving it) says what was awaited when it times out."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what() if callable(what) else what}"
        time.sleep(0.2)
