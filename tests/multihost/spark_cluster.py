"""A Spark standalone cluster across hosts: pyspark's own ``spark-class`` Master in one host, a Worker in others.

Each Worker offers one core (one Spark task, so one Horovod rank, per worker host) and runs its executors from its
own work folder. The hosts' environment is the image's (``SPARK_HOME`` is the pyspark package folder, as in the
image); ``restart_worker`` can give one worker host another one (e.g. a slow Python).
"""

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional, Sequence

from tests.multihost.network import Host, Network

PORT = 7077


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _spark_class(*args: str) -> list:
    return [os.path.join(spark_home(), "bin", "spark-class"), *args]


@dataclass
class SparkCluster:
    master: Host
    workers: Sequence[Host]
    env: Dict[str, str]
    logdir: Path
    memory: str = "3g"
    procs: Dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://{self.master.name}:{PORT}"

    def log(self, host: Host) -> str:
        path = self.logdir / f"spark-{host.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_master(self) -> None:
        self._start(self.master, "spark master", ["org.apache.spark.deploy.master.Master", "--host", self.master.name,
                                                  "--port", str(PORT), "--webui-port", "8080"], self.env)

    def start_worker(self, host: Host, env: Optional[Dict[str, str]] = None, timeout: float = 90) -> None:
        """A one-core Worker in ``host`` (with ``env`` on top of the cluster's); returns once the master has it."""
        workdir = self.logdir / f"spark-work-{host.name}"
        workdir.mkdir(exist_ok=True)
        registered = self._registrations(host)
        self._start(host, "spark worker", ["org.apache.spark.deploy.worker.Worker", "--host", host.name, "--cores", "1",
                                           "--memory", self.memory, "--work-dir", str(workdir), "--webui-port",
                                           "8081", self.url], {**self.env, **(env or {})})
        deadline = time.monotonic() + timeout
        while self._registrations(host) == registered:
            for where, proc in ((self.master, self.procs[self.master.name]), (host, self.procs[host.name])):
                assert proc.poll() is None, f"Spark on {where.name} exited: {self.log(where)[-3000:]}"
            assert time.monotonic() < deadline, f"{host.name} did not register in {timeout} s: {self.log(host)}"
            time.sleep(0.25)

    def restart_worker(self, host: Host, env: Optional[Dict[str, str]] = None) -> None:
        self._stop(host)
        self.start_worker(host, env)

    def stop(self) -> None:
        for host in [*self.workers, self.master]:
            self._stop(host)

    def _registrations(self, host: Host) -> int:
        return len(re.findall(rf"Registering worker {re.escape(host.name)}:\d+", self.log(self.master)))

    def _start(self, host: Host, what: str, args: list, env: Dict[str, str]) -> None:
        self.procs[host.name] = host.start_daemon(what, _spark_class(*args), env=env,
                                                  log=self.logdir / f"spark-{host.name}.log")

    def _stop(self, host: Host) -> None:
        proc = self.procs.pop(host.name, None)
        if proc is not None:
            host.stop_daemon(proc)


def start_spark_cluster(network: Network, master: str, workers: Sequence[str], env: Dict[str, str],
                        logdir: Path) -> SparkCluster:
    """Start the Master in ``master`` and a Worker in each of ``workers``; returns once all are registered."""
    cluster = SparkCluster(network[master], [network[w] for w in workers], {**env, "SPARK_HOME": spark_home()}, logdir)
    try:
        cluster.start_master()
        for host in cluster.workers:
            cluster.start_worker(host)
    except BaseException:
        cluster.stop()
        raise
    return cluster
