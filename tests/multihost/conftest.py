"""Fixtures of the multi-host tests: three hosts (a: launcher / Spark master and driver; b, c: workers).

Skipped, with the reason in pytest's summary, where the machine cannot make network namespaces (not root, no
``ip``/``sshd``). Every namespace, process and file is removed at the end, also on failure and on Ctrl-C (fixture
finalizers and an ``atexit`` hook); what a run killed with SIGKILL left behind is removed by the next run.
"""

import atexit
import contextlib
import os
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from tests.cluster.backend import Attempt, spark_driver
from tests.cluster.registration import package
from tests.conftest import ROOT, VENV_BIN, Ran
from tests.multihost import ssh
from tests.multihost.network import Network, can_make_namespaces, sweep_stale
from tests.multihost.spark_cluster import SparkCluster, start_spark_cluster

FLOWS = "tests.multihost.flows.multihost_flows"
# The image's environment (Dockerfile: the venv first on PATH, the code importable), which every pod starts with.
IMAGE_ENV = {"PATH": f"{VENV_BIN}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             "PYTHONPATH": str(ROOT)}
SLOW_PYTHON = Path(__file__).resolve().parent / "slow_python"


@pytest.fixture(scope="session")
def network(tmp_path_factory) -> Iterator[Network]:
    reason = can_make_namespaces()
    if reason:
        pytest.skip(f"multi-host tests: {reason}")
    sweep_stale()
    net = Network(["a", "b", "c"], tmp_path_factory.mktemp("multihost"))
    atexit.register(net.close)
    try:
        net.start()
        ssh.configure(net)
        yield net
    finally:
        net.close()
        atexit.unregister(net.close)


@pytest.fixture(autouse=True)
def hosts_left_clean(request, network):
    """After each test: every cable plugged in again, and no process of the test left in any host."""
    yield
    for name in network.hosts:
        network.set_link(name, up=True)
    deadline = time.monotonic() + 15
    while (left := _job_processes(network)) and time.monotonic() < deadline:
        time.sleep(0.5)
    for name in left:
        for line in left[name]:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(line.split()[0]), 9)
    assert not left, f"processes left running after the test: {left}"


def _job_processes(network: Network) -> Dict[str, list]:
    found = {name: host.job_processes() for name, host in network.hosts.items()}
    return {name: procs for name, procs in found.items() if procs}


@pytest.fixture(scope="session")
def registration(tmp_path_factory):
    """``pyflyte --pkgs tests.multihost.flows package`` for this venv's interpreter."""
    return package("tests.multihost.flows", tmp_path_factory.mktemp("package-multihost"))


@pytest.fixture(scope="session")
def agent(network) -> Path:
    """The launcher's remote agent script (what ``OMPI_MCA_plm_rsh_agent`` names)."""
    return ssh.rsh_agent(network.workdir / "rsh-agent.sh")


def pod_env(template, attempt: Attempt, extra: Dict[str, str]) -> Dict[str, str]:
    """A worker pod's environment: the image's, the task container's (with propeller's additions), then ``extra``."""
    env = {**IMAGE_ENV, **attempt.env(template)}
    for name, value in extra.items():
        env[name] = f"{value}:{env[name]}" if name == "PYTHONPATH" else value
    return env


@contextlib.contextmanager
def worker_pods(network: Network, envs: Dict[str, Dict[str, str]], logdir: Path) -> Iterator[None]:
    """sshd in each worker host (``envs``: host -> its pod environment) for the time of one job: pods live per job."""
    started = []
    try:
        for name, env in envs.items():
            started.append((network[name], ssh.start_sshd(network[name], env, logdir / f"sshd-{name}.log")))
        yield
    finally:
        for host, proc in started:
            host.stop_daemon(proc)


@pytest.fixture(scope="session")
def spark_cluster(network, tmp_path_factory) -> Iterator[SparkCluster]:
    """Spark standalone: the Master in host a, a one-core Worker in each of b and c (one rank per worker host)."""
    cluster = start_spark_cluster(network, "a", ["b", "c"], IMAGE_ENV, tmp_path_factory.mktemp("spark"))
    yield cluster
    cluster.stop()


def run_driver(template, attempt: Attempt, workdir: Path, network: Network, cluster: SparkCluster,
               timeout: float = 300) -> Ran:
    """The driver pod's command in host a against the standalone master; the driver binds to a's address."""
    a = network["a"]
    return spark_driver(template, attempt, workdir, master=cluster.url,
                        extra_env={"SPARK_DRIVER_BIND_ADDRESS": a.address}, on=a.command([]), timeout=timeout)
