"""The attacked job, seen from outside (tests/support/attacks.py): its processes, their environments and command lines,
what they listen on and in which network namespace; running a job with an attack beside it; ``Harm`` when an attack
did harm.

Only the standard library at the top, as in attacks.py (``nobody`` imports this file with the system's Python).
"""

import contextlib
import ipaddress
import os
import socket
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple


class Harm(AssertionError):
    """An attack did harm."""


def job_processes() -> List[int]:
    """This process and every process it started."""
    import psutil

    me = psutil.Process()
    return [me.pid] + [p.pid for p in me.children(recursive=True)]


def environ(pid: int) -> Dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def rank_environ(rank: int = 0, timeout: float = 120) -> Dict[str, str]:
    """The environment of the job's rank ``rank`` once it has started (a process with Horovod's rank variables)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in job_processes():
            env = environ(pid)
            if env.get("HOROVOD_RANK") == str(rank) and "HOROVOD_GLOO_RENDEZVOUS_PORT" in env:
                return env
            if env.get("OMPI_COMM_WORLD_RANK") == str(rank):
                return env
        time.sleep(0.2)
    raise RuntimeError(f"rank {rank} of the job did not start within {timeout:.0f} s")


def listeners_beyond_loopback() -> List[str]:
    """The job's listening TCP sockets on anything but a loopback address, as ``ss -ltnp`` would show them."""
    import psutil

    pids = set(job_processes())
    found = []
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            address = ipaddress.ip_address(conn.laddr.ip.split("%")[0])
            if not (getattr(address, "ipv4_mapped", None) or address).is_loopback:
                found.append(f"{conn.laddr.ip}:{conn.laddr.port} ({psutil.Process(conn.pid).name()})")
    return found


def command_lines_holding(*values: str) -> List[str]:
    """Every process on this host whose command line holds one of ``values``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().decode(errors="replace") if entry.name.isdigit() else ""
        except OSError:
            continue
        if any(v and v in line for v in values):
            found.append(f"{entry.name}: {line.replace(chr(0), ' ')[:200]}")
    return found


def while_running(job: Callable[[], object], attack: Callable[[], str], known: Tuple[str, ...] = ()) -> str:
    """Run ``job`` here and ``attack`` beside it, and look at what the job listens on all along; the attack's report
    once the job ended well and nothing but the processes named ``known`` listened beyond loopback (``Harm``
    else)."""
    report: Dict[str, object] = {}
    listening: set = set()
    done = threading.Event()

    def attacking() -> None:
        try:
            report["text"] = attack()
        except BaseException as exc:  # reported in the caller's thread
            report["error"] = exc

    def watching() -> None:
        while not done.wait(0.2):
            listening.update(listeners_beyond_loopback())

    threads = [threading.Thread(target=attacking, daemon=True), threading.Thread(target=watching, daemon=True)]
    for thread in threads:
        thread.start()
    try:
        job()
    except Exception as exc:
        raise Harm(f"the attacked job failed: {type(exc).__name__}: {str(exc)[:300]}") from exc
    finally:
        done.set()
    for thread in threads:
        thread.join(60)
    if "error" in report:
        raise report["error"]  # type: ignore[misc]
    beyond = sorted(b for b in listening if not b.endswith(tuple(f"({name})" for name in known)))
    if beyond:
        raise Harm(f"the local job listened beyond loopback: {beyond}")
    others = f" but {', '.join(sorted(listening))}" if listening else ""
    return f"{report['text']}; nothing listened beyond loopback{others}; the job finished"


def expect(outcomes: List[str], allowed: Tuple[str, ...], what: str) -> None:
    if not all(o in allowed for o in outcomes):
        raise Harm(f"{what}: {outcomes}")


def no_secret_in_argv(canary: str) -> str:
    """Neither ``canary`` nor rank 0's job secret is on any process's command line."""
    secret = rank_environ().get("FLYTE_HOROVOD_JOB_SECRET", "")
    if not secret:
        raise Harm("rank 0 has no job secret")
    leaked = command_lines_holding(canary, secret)
    if leaked:
        raise Harm(f"a canary or the job secret on a command line: {leaked}")
    return "no secret in argv"


def net_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""


def listening_ports(pid: int) -> List[int]:
    """The TCP ports listened on in ``pid``'s network namespace (its ``/proc/<pid>/net/tcp`` and ``tcp6``)."""
    ports = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}") as rows:
            ports += [int(f[1].rsplit(":", 1)[1], 16) for f in map(str.split, list(rows)[1:]) if f[3] == "0A"]
    return ports


def host_addresses() -> List[str]:
    """Every address of this host's interfaces, loopback included (link-local ones aside)."""
    import psutil

    found = set()
    for entries in psutil.net_if_addrs().values():
        found.update(e.address for e in entries if e.family in (socket.AF_INET, socket.AF_INET6)
                     and not e.address.startswith("fe80"))
    return sorted(found)
