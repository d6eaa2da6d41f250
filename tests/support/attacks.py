"""Attacks on a running Horovod job by whoever lacks its secret: a second local user (``nobody``, a process this one
starts as that user) or a process of the job's own user that was not given the secret (this one).

Each attack (``ATTACKS``) runs a real job on this host, attacks it while its ranks run and returns what happened, or
raises ``Harm`` (``job_watch``: the job seen from outside): code ran, the job failed, a key or a secret leaked, a listener reached beyond loopback.
``python tests/support/attacks.py NAME`` prints the outcome (the security rows of scripts/reliability.py);
``python tests/support/attacks.py requests JSON`` is the attacker that runs as ``nobody`` (and, in another network
namespace, the multi-host tests' attacker).

Only the standard library at the top: ``nobody`` runs this file as a script, and ranks import its job bodies.
"""

import base64
import http.client
import json
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

if __package__:
    from . import job_watch as watch
    from .liveness_attack import attack_liveness
else:  # run as a script (``python tests/support/attacks.py NAME``, and nobody's attacker): this folder is on sys.path
    import job_watch as watch
    from liveness_attack import attack_liveness

Request = Tuple[str, str, str]  # method, path, body (text)
RUN_S = 8.0  # how long a job's body runs while it is attacked
SYSTEM_PYTHON = "/usr/bin/python3"  # the attacker's: the venv's interpreter may live where nobody cannot go


class OpenOnUnpickle:
    """A pickle that creates a file where it is unpickled: code run in the job."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def http_request(port: int, method: str, path: str, body: str = "", address: str = "127.0.0.1") -> str:
    """One request to ``address``:``port``; its status, or "dropped" where the server closed it unanswered."""
    try:
        conn = http.client.HTTPConnection(address, port, timeout=5)
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


# ---------------------------------------------------------------- attacks, one job each
def attack_elastic() -> str:
    """A local elastic job (2 workers); its rendezvous gets a pickle and a request for the workers' keys."""
    from flytekitplugins.horovod import Horovod
    from horovod_flyte_runtime.local_launcher import run_local_elastic

    canary = _canary()
    folder = tempfile.TemporaryDirectory(prefix="attack-")
    marker = os.path.join(folder.name, "code-ran")

    def attack() -> str:
        env = watch.rank_environ()
        port, host = int(env["HOROVOD_GLOO_RENDEZVOUS_PORT"]), env["HOROVOD_HOSTNAME"]
        time.sleep(4)  # the workers registered their addresses by now
        keys = [("GET", f"/worker_addresses/{host}:0", ""), ("GET", f"/worker_addresses/{host}:1", "")]
        put = [("PUT", f"/worker_addresses/{host}:0", pickle_body(marker))]
        rank_and_size = [("GET", f"/rank_and_size/{host}:0", "")]
        same_user = [http_request(port, *r) for r in put + keys + GLOO_KEY_JUNK + rank_and_size]
        watch.expect(same_user, ("403",), "without the secret, the elastic rendezvous answered")
        other_user = as_nobody(port, put + keys + [("GET", f"/rank_and_size/{host}:0", "")])
        watch.expect(other_user, ("dropped",), "as nobody, the elastic rendezvous answered")
        checks = watch.no_secret_in_argv(canary)
        if os.path.exists(marker):
            raise watch.Harm("the pickle PUT to the elastic rendezvous ran")
        return (f"without the secret: {'/'.join(same_user)}; as nobody: {'/'.join(other_user)}; no code ran; "
                f"{checks}")

    def job() -> None:
        result = run_local_elastic(elastic_body, {"seconds": RUN_S}, workers=2, min_workers=1, max_workers=2, slots=1,
                                   settings=Horovod(framework="pytorch"), elastic_timeout=60)
        if result is None or result.value != 0:
            raise watch.Harm(f"rank 0's result: {result}")

    with folder:
        return watch.while_running(job, attack)


# What an attacker without the secret sends Gloo's rendezvous: a rank's address overwritten, read, its key deleted,
# and the server's own files asked for (SimpleHTTPRequestHandler's HEAD)
GLOO_KEY_JUNK: List[Request] = [("PUT", "/global/0", "junk"), ("PUT", "/global/1", "junk"), ("GET", "/global/0", ""),
                                ("DELETE", "/global/0", ""), ("HEAD", "/", "")]


def attack_gloo() -> str:
    """Local Gloo ranks; their key-value store gets junk from another user (it aborted hvd.init before)."""
    from flytekitplugins.horovod import Horovod
    from horovod_flyte_runtime.local_launcher import run_local

    canary = _canary()

    def attack() -> str:
        port = int(watch.rank_environ()["HOROVOD_GLOO_RENDEZVOUS_PORT"])
        same_user = [http_request(port, *r) for r in GLOO_KEY_JUNK]
        watch.expect(same_user, ("403",), "without the secret, the Gloo key-value store answered")
        other_user = as_nobody(port, GLOO_KEY_JUNK)
        watch.expect(other_user, ("dropped",), "as nobody, the Gloo key-value store answered")
        return (f"without the secret: {'/'.join(same_user)}; as nobody: {'/'.join(other_user)}; "
                f"{watch.no_secret_in_argv(canary)}")

    return watch.while_running(lambda: run_local(sleeping_body, {"seconds": RUN_S / 2}, num_proc=2,
                                           settings=Horovod(framework="pytorch")), attack)


def attack_mpirun() -> str:
    """Local mpirun ranks: Open MPI 4.1's ``mpirun`` binds its control channel (ORTE's out-of-band TCP listener) and
    its PMIx tool listener to every address whatever it is told, and two connections that each sent it a line of
    junk and stayed open hung the job for good. The job now runs in a network namespace of its own: every port its
    processes listen on there is tried from this host's addresses with that junk; what their command lines hold."""
    from flytekitplugins.horovod import Horovod
    from horovod_flyte_runtime.local_launcher import run_local

    canary = _canary()
    held: List[socket.socket] = []

    def attack() -> str:
        watch.rank_environ()
        here = watch.net_namespace(os.getpid())
        pids = [pid for pid in watch.job_processes() if watch.net_namespace(pid) not in ("", here)]
        if not pids:
            raise watch.Harm("mpirun and its ranks run in this host's network namespace")
        ports = sorted({port for pid in pids for port in watch.listening_ports(pid)})
        if not ports:
            raise watch.Harm("no listening port of mpirun's found to attack")
        tried = [_junk_line(address, port, held) for port in ports for address in watch.host_addresses()]
        watch.expect(tried, ("refused",), f"junk to mpirun's ports {ports} from this host")
        return (f"junk lines to the {len(ports)} ports mpirun's processes listen on ({', '.join(map(str, ports))}), "
                f"from each of this host's {len(watch.host_addresses())} addresses: all {len(tried)} refused; "
                f"{watch.no_secret_in_argv(canary)}")

    try:
        return watch.while_running(lambda: run_local(sleeping_body, {"seconds": RUN_S / 2}, num_proc=2,
                                               settings=Horovod(framework="pytorch", controller="mpi")), attack)
    finally:
        for sock in held:
            sock.close()


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
        port = int(watch.rank_environ()["HOROVOD_GLOO_RENDEZVOUS_PORT"])
        plan = [("PUT", "/flytekitplugins_horovod_plan/hosts", json.dumps(["10.9.9.9", "10.9.9.9"]))]
        same_user = [http_request(port, *r) for r in plan + GLOO_KEY_JUNK]
        watch.expect(same_user, ("403",), "without the secret, the Spark rendezvous answered")
        other_user = as_nobody(port, plan + [("PUT", "/global/0", "junk")])
        watch.expect(other_user, ("dropped",), "as nobody, the Spark rendezvous answered")
        checks = watch.no_secret_in_argv(canary)
        return (f"plan and Gloo keys without the secret: {'/'.join(same_user)}; as nobody: {'/'.join(other_user)}; "
                f"{checks}")

    return watch.while_running(lambda: HorovodRunner(np=2, settings=Horovod(framework="pytorch")).run(
        sleeping_body, seconds=RUN_S / 2), attack)


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
        port, requests, *address = json.loads(args[1])
        print(json.dumps([http_request(port, *r, *address) for r in requests]))
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    try:
        print(f"no harm: {ATTACKS[args[0]]()}", flush=True)
    except watch.Harm as harm:
        print(f"HARM: {harm}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
