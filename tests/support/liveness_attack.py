"""The attack on rank 0's liveness port (``attacks.py``'s ``liveness``): no job, the two ranks' heartbeats as a job
runs them. Only the standard library at the top, as in ``attacks.py``, which imports this file as a script too."""

import json
import os
import socket
import tempfile
import time
from pathlib import Path

if __package__:
    from . import job_watch as watch
else:  # imported by attacks.py run as a script: this folder is on sys.path
    import job_watch as watch


def attack_liveness() -> str:
    """Rank 0's liveness port, with rank 0's and rank 1's heartbeats as a job runs them (``lost_rank_timeout`` of
    2 s, the job's secret in their environment): junk, a fake rank's hello (which got a fake rank reported lost), a
    forged proof, and a flood of silent connections while the real rank 1 connects."""
    from horovod_flyte_runtime.job_secret import SECRET_ENV
    from horovod_flyte_runtime.liveness import ADDRESS_FILE, MAX_UNPROVEN, Liveness
    from horovod_flyte_runtime.loopback import LOOPBACK_ENV

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
                raise watch.Harm("rank 0 kept a connection that did not prove the job's secret")
            flood = [_greeted(port) for _ in range(MAX_UNPROVEN + 4)]
            rank1.start()  # the oldest silent connection makes room for it
            time.sleep(2 * timeout + 1)
            if lost:
                raise watch.Harm(f"reported lost: {lost}")
            if Path(folder, ADDRESS_FILE).exists():  # rank 0 unpublishes once every rank proved itself
                raise watch.Harm("rank 1 did not get through to rank 0")
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
