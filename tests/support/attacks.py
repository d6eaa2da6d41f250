"""Attacks on a running Horovod job by whoever lacks its secret: a second local user (``nobody``, a process this one
starts as that user) or a process of the job's own user that was not given the secret (this one).

Each attack (``ATTACKS``) runs a real job on this host, attacks it while its ranks run and returns what happened, or
raises ``Harm``: code ran, the job failed, a key or a secret leaked, a listener reached beyond loopback.
``python tests/support/attacks.py NAME`` prints the outcome (the security rows of scripts/reliability.py);
``python tests/support/attacks.py requests JSON`` is the attacker that runs as ``nobody``.

Only the standard library at the top: ``nobody`` runs this file as a script, and ranks import its job bodies.
"""

import base64
import contextlib
import http.client
import ipaddress
import json
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

Request = Tuple[str, str, str]  # method, path, body (text)
RUN_S = 8.0  # how long a job's body runs while it is attacked
SYSTEM_PYTHON = "/usr/bin/python3"  # the attacker's: the venv's interpreter may live where nobody cannot go


class Harm(AssertionError):
    """An attack did harm."""


class OpenOnUnpickle:
    """A pickle that creates a file where it is unpickled: code run in the job."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def http_request(port: int, method: str, path: str, body: str = "") -> str:
    """One request to 127.0.0.1:``port``; its status, or "dropped" where the server closed it unanswered."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request(method, path, body=body.encode())
        answer = conn.getresponse()
        return f"{answer.status} {answer.read()[:60]!r}" if answer.status == 200 and method == "GET" else str(answer.status)
    except (OSError, http.client.HTTPException):
        return "dropped"


def as_nobody(port: int, requests: List[Request]) -> List[str]:
    """``requests`` sent by a process of the user ``nobody``; their outcomes."""
    ran = subprocess.run([SYSTEM_PYTHON, __file__, "requests", json.dumps([port, requests])], user="nobody",
                         cwd="/", capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    if ran.returncode != 0:
        raise RuntimeError(f"the attacker as nobody failed: {ran.stderr[-2000:]}")
    return json.loads(ran.stdout)


def pickle_body(marker: str) -> str:
    """What Horovod's elastic worker PUTs (base64 of a pickle), here one that opens ``marker``."""
    return base64.b64encode(pickle.dumps(OpenOnUnpickle(marker))).decode()


# ---------------------------------------------------------------- the job's processes, seen from outside
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


def sleeping_body(seconds: float) -> int:
    """A rank's body: wait, and say which rank it was."""
    time.sleep(seconds)
    return int(os.environ.get("HOROVOD_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or 0)


def elastic_body(seconds: float) -> int:
    """An elastic rank's body: Horovod's elastic loop (its worker registers with the rendezvous), a committed step
    every tenth of a second."""
    import horovod.torch as hvd

    state = hvd.elastic.TorchState(step=0)

    @hvd.elastic.run
    def train(state) -> int:
        while state.step < seconds * 10:
            time.sleep(0.1)
            state.step += 1
            state.commit()
        return hvd.rank()

    return train(state)


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


# ---------------------------------------------------------------- attacks, one job each
def attack_elastic() -> str:
    """A local elastic job (2 workers); its rendezvous gets a pickle and a request for the workers' keys."""
    from flytekitplugins.horovod import Horovod
    from flytekitplugins.horovod.local_launcher import run_local_elastic

    canary = _canary()
    folder = tempfile.TemporaryDirectory(prefix="attack-")
    marker = os.path.join(folder.name, "code-ran")

    def attack() -> str:
        env = rank_environ()
        port, host = int(env["HOROVOD_GLOO_RENDEZVOUS_PORT"]), env["HOROVOD_HOSTNAME"]
        time.sleep(4)  # the workers registered their addresses by now
        keys = [("GET", f"/worker_addresses/{host}:0", ""), ("GET", f"/worker_addresses/{host}:1", "")]
        put = [("PUT", f"/worker_addresses/{host}:0", pickle_body(marker))]
        same_user = [http_request(port, *r) for r in put + keys]
        expect(same_user, ("403",), "without the secret, the elastic rendezvous answered")
        other_user = as_nobody(port, put + keys + [("GET", f"/rank_and_size/{host}:0", "")])
        expect(other_user, ("dropped",), "as nobody, the elastic rendezvous answered")
        checks = no_secret_in_argv(canary)
        if os.path.exists(marker):
            raise Harm("the pickle PUT to the elastic rendezvous ran")
        return (f"without the secret: {'/'.join(same_user)}; as nobody: {'/'.join(other_user)}; no code ran; "
                f"{checks}")

    def job() -> None:
        result = run_local_elastic(elastic_body, {"seconds": RUN_S}, workers=2, min_workers=1, max_workers=2, slots=1,
                                   settings=Horovod(framework="pytorch"), elastic_timeout=60)
        if result is None or result.value != 0:
            raise Harm(f"rank 0's result: {result}")

    with folder:
        return while_running(job, attack)


def attack_gloo() -> str:
    """Local Gloo ranks; their key-value store gets junk from another user (it aborted hvd.init before)."""
    from flytekitplugins.horovod import Horovod
    from flytekitplugins.horovod.local_launcher import run_local

    canary = _canary()

    def attack() -> str:
        port = int(rank_environ()["HOROVOD_GLOO_RENDEZVOUS_PORT"])
        junk = [("PUT", "/global/0", "junk"), ("PUT", "/global/1", "junk"), ("GET", "/global/0", ""),
                ("DELETE", "/global/0", "")]
        other_user = as_nobody(port, junk)
        expect(other_user, ("dropped",), "as nobody, the Gloo key-value store answered")
        return f"as nobody: {'/'.join(other_user)}; {no_secret_in_argv(canary)}"

    return while_running(lambda: run_local(sleeping_body, {"seconds": RUN_S / 2}, num_proc=2,
                                           settings=Horovod(framework="pytorch")), attack)


def attack_mpirun() -> str:
    """Local mpirun ranks: Open MPI 4.1's ``mpirun`` binds its control channel (ORTE's out-of-band TCP listener) and
    its PMIx tool listener to every address whatever it is told, and two connections that each sent it a line of
    junk and stayed open hung the job for good. The job now runs in a network namespace of its own: every port its
    processes listen on there is tried from this host's addresses with that junk; what their command lines hold."""
    from flytekitplugins.horovod import Horovod
    from flytekitplugins.horovod.local_launcher import run_local

    canary = _canary()
    held: List[socket.socket] = []

    def attack() -> str:
        rank_environ()
        pids = [pid for pid in job_processes() if _net_namespace(pid) not in ("", _net_namespace(os.getpid()))]
        if not pids:
            raise Harm("mpirun and its ranks run in this host's network namespace")
        ports = sorted({port for pid in pids for port in _listening_ports(pid)})
        if not ports:
            raise Harm("no listening port of mpirun's found to attack")
        tried = [_junk_line(address, port, held) for port in ports for address in _host_addresses()]
        expect(tried, ("refused",), f"junk to mpirun's ports {ports} from this host")
        return (f"junk lines to the {len(ports)} ports mpirun's processes listen on ({', '.join(map(str, ports))}), "
                f"from each of this host's {len(_host_addresses())} addresses: all {len(tried)} refused; "
                f"{no_secret_in_argv(canary)}")

    try:
        return while_running(lambda: run_local(sleeping_body, {"seconds": RUN_S / 2}, num_proc=2,
                                               settings=Horovod(framework="pytorch", controller="mpi")), attack)
    finally:
        for sock in held:
            sock.close()


def _net_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return ""


def _listening_ports(pid: int) -> List[int]:
    """The TCP ports listened on in ``pid``'s network namespace (its ``/proc/<pid>/net/tcp`` and ``tcp6``)."""
    ports = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}") as rows:
            ports += [int(f[1].rsplit(":", 1)[1], 16) for f in map(str.split, list(rows)[1:]) if f[3] == "0A"]
    return ports


def _host_addresses() -> List[str]:
    """Every address of this host's interfaces, loopback included (link-local ones aside)."""
    import psutil

    found = set()
    for entries in psutil.net_if_addrs().values():
        found.update(e.address for e in entries if e.family in (socket.AF_INET, socket.AF_INET6)
                     and not e.address.startswith("fe80"))
    return sorted(found)


def _junk_line(address: str, port: int, held: List[socket.socket]) -> str:
    """Connect to ``address:port``, send the line that hung mpirun and keep the connection open; what happened."""
    try:
        sock = socket.create_connection((address, port), timeout=2)
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return f"{address}:{port}: {exc}"
    held.append(sock)
    sock.sendall(b"1 attacker-box\n")
    return f"{address}:{port}: connected"


def attack_spark() -> str:
    """Gloo ranks as tasks of a local Spark session: its slot plan from someone without the secret, another user's
    junk, what the session and the ranks listen on."""
    from flytekitplugins.horovod import Horovod, HorovodRunner

    canary = _canary()

    def attack() -> str:
        port = int(rank_environ()["HOROVOD_GLOO_RENDEZVOUS_PORT"])
        plan = [("PUT", "/flytekitplugins_horovod_plan/hosts", json.dumps(["10.9.9.9", "10.9.9.9"]))]
        same_user = [http_request(port, *r) for r in plan]
        expect(same_user, ("403",), "without the secret, the slot plan was answered")
        other_user = as_nobody(port, plan + [("PUT", "/global/0", "junk")])
        expect(other_user, ("dropped",), "as nobody, the Spark rendezvous answered")
        return f"plan without the secret: {same_user[0]}; as nobody: {'/'.join(other_user)}; {no_secret_in_argv(canary)}"

    return while_running(lambda: HorovodRunner(np=2, settings=Horovod(framework="pytorch")).run(
        sleeping_body, seconds=RUN_S / 2), attack)


def attack_liveness() -> str:
    """Rank 0's liveness port, with rank 0's and rank 1's heartbeats as a job runs them (``lost_rank_timeout`` of
    2 s, the job's secret in their environment): junk, a fake rank's hello (which got a fake rank reported lost), a
    forged proof, and a flood of silent connections while the real rank 1 connects."""
    from flytekitplugins.horovod.executor.job_secret import SECRET_ENV
    from flytekitplugins.horovod.executor.liveness import ADDRESS_FILE, MAX_UNPROVEN, Liveness
    from flytekitplugins.horovod.executor.loopback import LOOPBACK_ENV

    os.environ.update({SECRET_ENV: os.urandom(32).hex(), LOOPBACK_ENV: "1"})
    timeout, lost = 2.0, []
    with tempfile.TemporaryDirectory(prefix="attack-") as folder:
        rank0 = Liveness(0, 2, "host-0", timeout, folder, lost.append)
        rank1 = Liveness(1, 2, "host-1", timeout, folder, lost.append)
        rank0.start()
        try:
            port = json.loads(Path(folder, ADDRESS_FILE).read_text())["port"]
            junk, fake, forged = (_greeted(port) for _ in range(3))
            junk.sendall(b"GET / HTTP/1.0\r\n\r\n")  # stopped the check before (int() of "GET")
            fake.sendall(b"1 attacker-box\n")  # was reported lost after the timeout: RankLostError
            forged.sendall(b"1 attacker-box " + b"0" * 64 + b"\n")
            if not all(_closed(c, 5) for c in (junk, fake, forged)):
                raise Harm("rank 0 kept a connection that did not prove the job's secret")
            flood = [_greeted(port) for _ in range(MAX_UNPROVEN + 4)]
            rank1.start()  # the oldest silent connection makes room for it
            time.sleep(2 * timeout + 1)
            if lost:
                raise Harm(f"reported lost: {lost}")
            if Path(folder, ADDRESS_FILE).exists():  # rank 0 unpublishes once every rank proved itself
                raise Harm("rank 1 did not get through to rank 0")
            dropped = sum(_closed(c, 0.05) for c in flood)
        finally:
            rank1.stop()
            rank0.stop()
    return (f"junk, fake hello, forged proof dropped; {dropped} of {len(flood)} silent connections closed; none "
            "reported lost; rank 1 heard")


def _greeted(port: int) -> socket.socket:
    """A connection to a liveness port, its challenge read."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn.recv(64)
    return conn


def _closed(conn: socket.socket, wait: float) -> bool:
    """Whether the other end closes ``conn`` within ``wait`` s."""
    conn.settimeout(wait)
    try:
        return conn.recv(64) == b""
    except socket.timeout:
        return False
    except OSError:  # reset
        return True


def _canary() -> str:
    """A variable in the job's environment (this process's: each attack runs in a process of its own) whose value
    must appear on no command line."""
    value = f"canary-{os.urandom(8).hex()}"
    os.environ["FLYTE_HOROVOD_TEST_CANARY"] = value
    return value


ATTACKS: Dict[str, Callable[[], str]] = {"elastic": attack_elastic, "gloo": attack_gloo, "liveness": attack_liveness,
                                         "mpirun": attack_mpirun, "spark": attack_spark}


def main(argv: Optional[List[str]] = None) -> None:
    args = argv or sys.argv[1:]
    if args[0] == "requests":  # the attacker, as nobody
        port, requests = json.loads(args[1])
        print(json.dumps([http_request(port, *r) for r in requests]))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    try:
        print(f"no harm: {ATTACKS[args[0]]()}", flush=True)
    except Harm as harm:
        print(f"HARM: {harm}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
