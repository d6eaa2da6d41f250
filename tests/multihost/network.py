"""Hosts on one machine: Linux network namespaces joined by a bridge, each with its own address and name.

A ``Network`` is a "switch" namespace holding a bridge, and one namespace per host joined to it by a veth pair
(``eth0`` in the host, a bridge port in the switch). Nothing is added to the machine's own network namespace, so
the hosts reach each other only over the bridge, never over a shared loopback.

Each host also has its own hostname (UTS namespace) and, in a private mount namespace, its own ``/etc/hosts``,
``/etc/ssh``, ``/run`` and an empty ``~root/.bashrc`` (this machine's shell start-up is not the image's). The rest of
the file system, the project and its venv included, is shared, as the image is on every pod; so is ``/tmp``, which
stands in for the blob store. A process keeps the namespaces alive (``sleep infinity``); every command of a host
is started in them with ``nsenter``. Names carry the creating process id and a random part, so two runs never
collide, and ``sweep_stale`` removes what a run that was killed before its clean-up left behind.
"""

import ipaddress
import json
import os
import pwd
import signal
import subprocess
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from tests.conftest import ROOT

PREFIX = "hvdmh"  # every namespace this harness makes: hvdmh-<creator pid>-<random>-<host>
SUBNET = ipaddress.ip_network("10.77.0.0/24")  # private to each run's switch namespace, so runs cannot collide
IFACE = "eth0"  # the hosts' interface on the bridge, named as in a pod


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=check)


def netns_pids(netns: str) -> List[int]:
    """Processes in a network namespace (``ip netns pids``), zombies excluded."""
    found = ip("netns", "pids", netns, check=False)
    pids = []
    for word in found.stdout.split():
        with suppress(OSError):
            if Path(f"/proc/{word}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                pids.append(int(word))
    return pids


def kill_all(netns: str, timeout: float = 10.0) -> None:
    """SIGKILL every process in a namespace until none is left (``ip netns pids``)."""
    deadline = time.monotonic() + timeout
    while (pids := netns_pids(netns)) and time.monotonic() < deadline:
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def describe(pid: int) -> str:
    with suppress(OSError):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        return f"{pid} {cmdline[:300].strip()}"
    return f"{pid} (gone)"


@dataclass
class Host:
    """One host: its namespaces (held by ``init``), address, hostname and private files under ``root``."""

    name: str
    netns: str
    address: str
    root: Path
    port: str  # its bridge port in the switch namespace (the other end of its eth0)
    init: Optional[subprocess.Popen] = None
    daemons: Dict[int, str] = field(default_factory=dict)  # pid -> what: processes that may outlive a job

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    def command(self, args: Sequence[str], cwd: Path = ROOT) -> List[str]:
        """``args`` to run inside this host (its network, hostname and mounts), from ``cwd``."""
        assert self.init is not None and self.init.poll() is None, f"host {self.name} is not running"
        return ["nsenter", f"--target={self.init.pid}", "--net", "--uts", "--mount", f"--wd={cwd}", "--", *args]

    def start_daemon(self, what: str, args: Sequence[str], env: Dict[str, str], log: Path) -> subprocess.Popen:
        """Start a long-running process in this host, output to ``log``; it is killed with the host."""
        with open(log, "ab") as out:
            proc = subprocess.Popen(self.command(args), env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.daemons[proc.pid] = what
        return proc

    def stop_daemon(self, proc: subprocess.Popen) -> None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        self.daemons.pop(proc.pid, None)

    def pids(self) -> List[int]:
        return netns_pids(self.netns)

    def job_processes(self) -> List[str]:
        """Every process in this host other than its init and its daemons (sshd, Spark master or worker)."""
        keep = set(self.daemons) | ({self.init.pid} if self.init else set())
        return [describe(p) for p in self.pids() if p not in keep]

    def counters(self, iface: str = IFACE) -> Dict[str, int]:
        """Bytes and packets through an interface of this host (the kernel's counters)."""
        (link,) = json.loads(ip("-n", self.netns, "-j", "-s", "link", "show", "dev", iface).stdout)
        stats = link["stats64"]
        return {"rx_bytes": stats["rx"]["bytes"], "tx_bytes": stats["tx"]["bytes"],
                "rx_packets": stats["rx"]["packets"], "tx_packets": stats["tx"]["packets"]}


_INIT = """
set -e
hostname "$HOST_NAME"
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/sshd
mount --bind "$HOST_ROOT/etc/hosts" /etc/hosts
mount --bind "$HOST_ROOT/etc/ssh" /etc/ssh
if [ -e "$ROOT_HOME/.bashrc" ]; then mount --bind "$HOST_ROOT/bashrc" "$ROOT_HOME/.bashrc"; fi
echo ready
exec sleep infinity
"""


class Network:
    """A bridge and ``hosts`` joined to it; ``close()`` removes every process and namespace it made."""

    def __init__(self, names: Sequence[str], workdir: Path):
        self.id = f"{PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.switch = f"{self.id}-switch"
        self.workdir = workdir
        self.hosts: Dict[str, Host] = {}
        self._namespaces: List[str] = []
        addresses = iter(SUBNET.hosts())
        for name in names:
            address = str(next(addresses))
            self.hosts[name] = Host(name=f"{name}-{self.id[-6:]}", netns=f"{self.id}-{name}", address=address,
                                    root=workdir / name, port=f"p-{name}")

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def start(self) -> "Network":
        try:
            self._add_namespace(self.switch)
            ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            ip("-n", self.switch, "link", "set", "br0", "up")
            for host in self.hosts.values():
                self._add_host(host)
        except BaseException:
            self.close()
            raise
        return self

    def _add_namespace(self, name: str) -> None:
        ip("netns", "add", name)
        self._namespaces.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def _add_host(self, host: Host) -> None:
        self._add_namespace(host.netns)
        ip("-n", self.switch, "link", "add", host.port, "type", "veth", "peer", "name", IFACE, "netns", host.netns)
        ip("-n", self.switch, "link", "set", host.port, "master", "br0", "up")
        ip("-n", host.netns, "addr", "add", f"{host.address}/{SUBNET.prefixlen}", "dev", IFACE)
        ip("-n", host.netns, "link", "set", IFACE, "up")
        (host.etc / "ssh").mkdir(parents=True)
        (host.etc / "hosts").write_text("127.0.0.1\tlocalhost\n" + "".join(
            f"{h.address}\t{h.name}\n" for h in self.hosts.values()))
        (host.root / "bashrc").write_text("")  # the image's root has no shell start-up files of this machine
        env = {"PATH": os.environ["PATH"], "HOST_NAME": host.name, "HOST_ROOT": str(host.root),
               "ROOT_HOME": pwd.getpwuid(0).pw_dir}  # whose shell start-up sshd runs
        host.init = subprocess.Popen(["ip", "netns", "exec", host.netns, "unshare", "--uts", "--", "sh", "-c", _INIT],
                                     env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        ready = host.init.stdout.readline().strip()
        assert ready == "ready", f"host {host.name} did not start: {ready} {host.init.stdout.read()}"

    def set_link(self, name: str, up: bool) -> None:
        """Plug or unplug a host's cable: its port on the bridge goes up or down (``ip link set ... down``)."""
        ip("-n", self.switch, "link", "set", self.hosts[name].port, "up" if up else "down")

    def close(self) -> None:
        """Kill every process in every namespace of this network and delete the namespaces."""
        for netns in reversed(self._namespaces):
            kill_all(netns)
        for host in self.hosts.values():
            if host.init is not None:
                host.init.kill()
                host.init.wait()
        for netns in reversed(self._namespaces):
            ip("netns", "del", netns, check=False)
        self._namespaces.clear()


def sweep_stale() -> List[str]:
    """Remove the namespaces (and their processes) of earlier runs whose creating process is gone."""
    removed = []
    for line in ip("netns", "list", check=False).stdout.splitlines():
        netns = line.split()[0] if line.split() else ""
        parts = netns.split("-")
        if len(parts) < 4 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        if Path(f"/proc/{parts[1]}").exists():
            continue  # its run is still going
        kill_all(netns)
        ip("netns", "del", netns, check=False)
        removed.append(netns)
    return removed


def can_make_namespaces() -> Optional[str]:
    """None when this machine can run the multi-host tests, else why not (for the skip message)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs, sshd); run as root or in CI"
    for tool, path in (("ip", "iproute2"), ("nsenter", "util-linux"), ("unshare", "util-linux"),
                       ("ss", "iproute2")):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], stdout=subprocess.DEVNULL).returncode != 0:
            return f"needs `{tool}` ({path}); scripts/setup.sh installs it as root on Debian"
    if not any(Path(p).exists() for p in ("/usr/sbin/sshd", "/sbin/sshd")):
        return "needs sshd (openssh-server); scripts/setup.sh installs it as root on Debian"
    probe = f"{PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:6]}-probe"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace here: {made.stderr.strip()}"
    try:
        veth = ip("-n", probe, "link", "add", "name", "v0", "type", "veth", "peer", "name", "v1", check=False)
        if veth.returncode != 0:
            return f"cannot create veth pairs here: {veth.stderr.strip()}"
    finally:
        ip("netns", "del", probe, check=False)
    return None
