"""What crossed the network during a job, seen from outside the processes under test.

``Observer`` samples every host a few times a second while a job runs: the processes that are Horovod ranks (by
the rank variables their launcher gave them: ``HOROVOD_RANK``, ``OMPI_COMM_WORLD_RANK``), each rank's established
TCP connections (``ss`` in the host's namespace), every process's command line, and the bytes through each host's
bridge interface before and after. Nothing in the job is changed or instrumented.
"""

import re
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

from tests.multihost.network import Host, describe

RANK_VARS = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK")
SEEN_VARS = RANK_VARS + (
    "HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "HOROVOD_HOSTNAME",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT", "HOROVOD_GLOO_IFACE", "HOROVOD_CONTROLLER",
    "OMPI_MCA_orte_hnp_uri", "FLYTE_INTERNAL_EXECUTION_ID", "FLYTE_HOROVOD_JOB_SECRET",
)
_ADDRESS = re.compile(r"^\[?(?:::ffff:)?([0-9a-fA-F.:*]+?)\]?(?:%\w+)?:(\d+|\*)$")


@dataclass
class RankSeen:
    """One rank process as seen from outside: where it ran, what its launcher told it, whom it talked to."""

    rank: int
    host: str  # the key of its host in the network ("b", "c", ...)
    pid: int
    env: Dict[str, str]
    cmdline: str
    peers: Set[Tuple[str, str]] = field(default_factory=set)  # (local address, remote address), TCP established


def _environ(pid: int) -> Optional[Dict[str, str]]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def connections(host: Host) -> List[Tuple[str, str, Set[int]]]:
    """Established TCP connections in a host: (local address, remote address, pids holding the socket)."""
    out = subprocess.run(["ss", "-N", host.netns, "-tnpH", "state", "established"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    found = []
    for line in out.splitlines():
        words = line.split()
        if len(words) < 4:
            continue
        local, remote = _ADDRESS.match(words[2]), _ADDRESS.match(words[3])
        if local and remote:
            found.append((local.group(1), remote.group(1), {int(p) for p in re.findall(r"pid=(\d+)", line)}))
    return found


@dataclass
class Job:
    """The rank processes of one Horovod job (a rank's launcher shell and its Python can both carry the rank)."""

    meeting: str
    ranks: Dict[int, List[RankSeen]] = field(default_factory=dict)

    def rank_hosts(self) -> Dict[int, str]:
        """The host of each rank; fails if a rank was seen on two hosts."""
        hosts = {}
        for rank, seen in sorted(self.ranks.items()):
            where = {s.host for s in seen}
            assert len(where) == 1, f"rank {rank} of job {self.meeting} seen on several hosts: {where}"
            hosts[rank] = where.pop()
        return hosts

    def env(self, rank: int) -> Dict[str, str]:
        return {k: v for s in self.ranks[rank] for k, v in s.env.items()}

    def peers_of(self, rank: int) -> Set[Tuple[str, str]]:
        return set().union(*(s.peers for s in self.ranks.get(rank, [])))


class Observer:
    """Samples ``hosts`` every ``interval`` s between ``__enter__`` and ``__exit__``."""

    def __init__(self, hosts: Dict[str, Host], interval: float = 0.2):
        self.hosts = hosts
        self.interval = interval
        self.before: Dict[str, Dict[str, int]] = {}
        self.after: Dict[str, Dict[str, int]] = {}
        self.seen: Dict[int, RankSeen] = {}  # by pid
        self.command_lines: Set[str] = set()  # of every process in the hosts
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="multihost-observer", daemon=True)

    def __enter__(self) -> "Observer":
        self.before = {name: host.counters() for name, host in self.hosts.items()}
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()  # a last look (rank processes of a failed job may still be around)
        self.after = {name: host.counters() for name, host in self.hosts.items()}

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with suppress(Exception):  # a host may be going away at the end of a test
                self.sample()

    def sample(self) -> None:
        """One look at every host, all hosts at once: a connection between two hosts that lives for less than one
        look (a short job's) is then seen from both ends, not from the host looked at first alone (seen in CI)."""
        with ThreadPoolExecutor(max(1, len(self.hosts)), thread_name_prefix="multihost-look") as pool:
            list(pool.map(self._sample_host, self.hosts.items()))

    def _sample_host(self, item: Tuple[str, Host]) -> None:
        name, host = item
        ranks = {}
        for pid in host.pids():
            with suppress(OSError):
                self.command_lines.add(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"))
            seen = self.seen.get(pid) or self._rank(name, pid)
            if seen is not None:
                self.seen[pid] = ranks[pid] = seen
        if ranks:
            for local, remote, pids in connections(host):
                for pid in pids & set(ranks):
                    ranks[pid].peers.add((local, remote))

    @staticmethod
    def _rank(host: str, pid: int) -> Optional[RankSeen]:
        """The rank a process is, if its launcher gave it one. Read again at every sample until it is one: a rank that
        ``orted`` forked shows ``orted``'s environment until its exec, so a first look can come too early."""
        env = _environ(pid)
        var = next((v for v in RANK_VARS if env and env.get(v, "") != ""), None)
        if var is None:
            return None
        return RankSeen(int(env[var]), host, pid, {k: env[k] for k in SEEN_VARS if k in env}, describe(pid))

    def jobs(self) -> Dict[str, "Job"]:
        """The Horovod jobs seen, by where their ranks met (Gloo rendezvous or mpirun's address)."""
        jobs: Dict[str, Job] = {}
        for seen in self.seen.values():
            key = (seen.env.get("OMPI_MCA_orte_hnp_uri")
                   or f"{seen.env.get('HOROVOD_GLOO_RENDEZVOUS_ADDR')}:{seen.env.get('HOROVOD_GLOO_RENDEZVOUS_PORT')}")
            jobs.setdefault(key, Job(key)).ranks.setdefault(seen.rank, []).append(seen)
        return jobs

    def delta(self, name: str, counter: str) -> int:
        return self.after[name][counter] - self.before[name][counter]

    def summary(self) -> str:
        lines = [f"rank {r} on {s.host} pid {s.pid}: env {s.env}; peers {sorted(s.peers)}"
                 for job in self.jobs().values() for r, seen in sorted(job.ranks.items()) for s in seen]
        lines += [f"{name} eth0: tx {self.delta(name, 'tx_bytes')} B, rx {self.delta(name, 'rx_bytes')} B"
                  for name in self.hosts if name in self.after]
        return "\n".join(lines)
