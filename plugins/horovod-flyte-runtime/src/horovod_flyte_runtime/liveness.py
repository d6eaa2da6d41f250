"""Liveness of a Horovod world's ranks: every rank tells rank 0 once a second that it is alive, rank 0 answers.

A collective whose peer's host or network link is gone waits forever (MPI) or until Gloo's timeout, and then blames
the rank that waited. Here rank 0 notices a rank it has not heard from for ``timeout`` seconds and reports that rank,
with its host, as lost; a rank that has not heard from rank 0 for as long stops. A rank whose process ends closes its
connection, which is not a loss: its launcher reports how it ended.

Only the job's ranks are heard: rank 0 greets each connection with a random challenge, and a rank's hello (``<rank>
<host> <HMAC of the challenge, rank and host under the job secret>``, see ``liveness_hello``) must prove it holds the
job's secret (``job_secret``); a connection that does not within ``HELLO_TIMEOUT_S`` (or says something else) is
dropped, and no more than ``MAX_UNPROVEN`` wait at once (a new one closes the oldest), so no one else can report a fake
rank lost, stop the check or fill its table. In a local run rank 0 listens on loopback, for this user only
(``loopback``).

Rank 0 publishes where it listens in a folder every rank reaches (the job's failure folder, a local path or any
fsspec URL), so no framework collective runs before the body (that would start TensorFlow's runtime before the body
picks its GPU). The heartbeat, the first connection included, runs in daemon threads, beside the body.

No flytekit import: rank processes started by Spark tasks use this module.
"""

import contextlib
import json
import logging
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import fsspec

from .job_secret import job_secret
from .liveness_hello import Peer, hello, read_line, receive, send_line
from .loopback import LOOPBACK, bind_address, from_this_user, local_run

logger = logging.getLogger("flytekitplugins.horovod")

BEAT_S = 1.0  # how often a rank says it is alive, and rank 0 checks who went silent
ADDRESS_FILE = "liveness-rank-0.json"  # in the shared folder: rank 0's addresses and port
HELLO_WAIT_S = 3.0  # how long a rank's body waits for its hello to reach rank 0 (milliseconds when rank 0 is there)
HELLO_TIMEOUT_S = 10.0  # how long rank 0 waits for a connection's hello before dropping it
MAX_UNPROVEN = 16  # connections without a valid hello yet, at most; a new one closes the oldest


@dataclass
class LostRank:
    """A rank that went silent: its rank, the host it announced and for how long it has been silent."""

    rank: int
    host: str
    silent_s: float

    def describe(self, reporter: str) -> str:
        return (f"{reporter} heard nothing from rank {self.rank} on {self.host} for {self.silent_s:.0f} s: its host, "
                "its network link or its process stopped")


OnLost = Callable[[LostRank], None]


class Liveness:
    """The heartbeat of one rank: ``start`` right after ``hvd.init()`` on every rank, ``stop`` when the body ended.

    ``on_lost`` runs in a thread of its own (rank 0 goes on answering the other ranks meanwhile) and is expected to
    end the process."""

    def __init__(self, rank: int, size: int, host: str, timeout: float, folder: str, on_lost: OnLost):
        self.rank, self.size, self.host, self.timeout, self.on_lost = rank, size, host, timeout, on_lost
        self.folder = folder.rstrip("/")
        self._stop = threading.Event()
        self._sockets: List[socket.socket] = []
        self._lost = threading.Lock()
        self._hello_done = threading.Event()  # this rank said hello to rank 0, or gave up trying
        self._secret = job_secret()

    def start(self) -> None:
        """Rank 0 listens and publishes where; any other rank connects and says hello. The heartbeat (and a rank's
        connecting) runs in a daemon thread; the body waits at most ``HELLO_WAIT_S`` for the hello, so that rank 0
        watches a rank from its first step on, while a rank whose rank 0 has already ended (and will never answer)
        still fails within seconds."""
        if self.rank == 0:
            listener = socket.create_server((bind_address(), 0), backlog=max(self.size, 8))
            self._sockets.append(listener)
            fs, _, (root,) = fsspec.get_fs_token_paths(self.folder)
            fs.makedirs(root, exist_ok=True)
            addresses = [LOOPBACK] if local_run() else ipv4_addresses() + [LOOPBACK]
            fs.pipe_file(f"{root}/{ADDRESS_FILE}", json.dumps(
                {"addresses": addresses, "port": listener.getsockname()[1]}).encode())
            target, args = self._serve, (listener,)
        else:
            target, args = self._connect_and_beat, ()
        threading.Thread(target=self._guarded, args=(target, *args), name="horovod-liveness", daemon=True).start()
        if self.rank != 0:
            self._hello_done.wait(HELLO_WAIT_S)

    def stop(self) -> None:
        """End the heartbeat: the other ranks see an ended rank (a closed connection), not a lost one. Rank 0
        removes the address it published (and the folder, if nothing else is in it)."""
        self._stop.set()
        for sock in list(self._sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self.rank == 0:
            self._unpublish()

    def _unpublish(self) -> None:
        """Remove the published address (and its folder, when nothing else is in it): every rank has it."""
        fs, _, (root,) = fsspec.get_fs_token_paths(self.folder)
        with contextlib.suppress(Exception):
            fs.rm(f"{root}/{ADDRESS_FILE}")
            if not fs.ls(root):
                fs.rmdir(root)

    def _guarded(self, target: Callable[..., None], *args: socket.socket) -> None:
        try:
            target(*args)
        except Exception:  # the heartbeat must never take the rank down by itself
            if not self._stop.is_set():
                logger.warning("rank %d: the liveness check stopped", self.rank, exc_info=True)
        finally:
            for sock in self._sockets:
                sock.close()

    def _report(self, lost: LostRank) -> None:
        if self._lost.acquire(blocking=False) and not self._stop.is_set():  # once
            threading.Thread(target=self.on_lost, args=(lost,), name="horovod-lost-rank", daemon=True).start()

    def _serve(self, listener: socket.socket) -> None:
        """Rank 0: accept the ranks, drop whoever does not prove the job's secret, echo the ranks' beats, report one
        silent for ``timeout`` s."""
        started, warned, everyone, met = time.monotonic(), False, False, 0
        peers: Dict[socket.socket, Peer] = {}
        with selectors.DefaultSelector() as selector:
            selector.register(listener, selectors.EVENT_READ)
            while not self._stop.is_set():
                events = selector.select(BEAT_S)
                now = time.monotonic()
                for key, _ in events:
                    if key.fileobj is listener:
                        conn, _ = listener.accept()
                        peer = Peer(now)
                        if (local_run() and not from_this_user(conn)) or not send_line(conn, peer.nonce):
                            conn.close()
                            continue
                        unproven = [c for c, p in peers.items() if p.rank is None]
                        if len(unproven) >= MAX_UNPROVEN:  # the oldest goes: a rank answers at once, a flood does not
                            self._drop(selector, peers, unproven[0])
                        self._sockets.append(conn)
                        selector.register(conn, selectors.EVENT_READ)
                        peers[conn] = peer
                        continue
                    conn, peer = key.fileobj, peers[key.fileobj]
                    data = receive(conn)
                    proven = peer.rank is not None
                    if not data or not peer.heard(data, now, self._secret, self.size):
                        # the rank's process ended (its launcher reports how), or not a rank of this job
                        self._drop(selector, peers, conn)
                        continue
                    if peer.rank is None:
                        continue
                    met += not proven
                    if not everyone and sum(p.rank is not None for p in peers.values()) == self.size - 1:
                        everyone = True
                        self._unpublish()
                    with contextlib.suppress(OSError):
                        conn.sendall(b".")
                for conn, peer in list(peers.items()):
                    if peer.rank is not None and now - peer.last > self.timeout:
                        self._report(LostRank(peer.rank, peer.host, now - peer.last))
                    elif peer.rank is None and now - peer.since > HELLO_TIMEOUT_S:
                        self._drop(selector, peers, conn)
                # ranks that connected and ended since (a closed connection) were watched: only a rank that never
                # connected is not
                if not warned and now - started > self.timeout and met < self.size - 1:
                    warned = True
                    logger.warning("rank 0: only %d of the other %d ranks reached its liveness port; the others are "
                                   "not watched", met, self.size - 1)

    def _drop(self, selector: selectors.BaseSelector, peers: Dict[socket.socket, Peer], conn: socket.socket) -> None:
        selector.unregister(conn)
        peers.pop(conn)
        self._sockets.remove(conn)
        conn.close()

    def _connect_and_beat(self) -> None:
        """Any other rank: connect to rank 0, answer its challenge with the hello, then beat."""
        try:
            conn = self._connect()
            if conn is None:
                return
            self._sockets.append(conn)
            if self._stop.is_set():  # stop() ran while connecting: it did not see this socket
                return
            conn.settimeout(HELLO_WAIT_S)
            conn.sendall(hello(self._secret, read_line(conn), self.rank, self.host))
        finally:
            self._hello_done.set()
        self._beat(conn)

    def _beat(self, conn: socket.socket) -> None:
        """Any other rank: a beat a second; report rank 0 when silent for ``timeout`` s."""
        last = time.monotonic()
        conn.settimeout(BEAT_S)
        while not self._stop.is_set():
            try:
                conn.sendall(b".")
                data = conn.recv(4096)
            except socket.timeout:
                data = None
            except OSError:  # rank 0's process ended, or stop()
                return
            now = time.monotonic()
            if data == b"":  # rank 0's process ended
                return
            if data:
                last = now
                time.sleep(max(0.0, BEAT_S - (time.monotonic() - now)))
            elif now - last > self.timeout:
                self._report(LostRank(0, "rank 0's host", now - last))
                return

    def _connect(self) -> Optional[socket.socket]:
        """Rank 0's liveness port, from the address it published; retried until it answers or ``timeout`` passes."""
        fs, _, (root,) = fsspec.get_fs_token_paths(self.folder)
        deadline = time.monotonic() + max(self.timeout, 30.0)
        while not self._stop.is_set() and time.monotonic() < deadline:
            with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
                fs.invalidate_cache()
                where = json.loads(fs.cat(f"{root}/{ADDRESS_FILE}").decode())
                for address in where["addresses"]:
                    with contextlib.suppress(OSError):
                        return socket.create_connection((address, where["port"]), timeout=3)
            time.sleep(0.1)
        if not self._stop.is_set():
            logger.warning("rank %d: rank 0's liveness port was not reachable; this rank runs unwatched", self.rank)
        return None


def ipv4_addresses() -> List[str]:
    """This host's non-loopback IPv4 addresses."""
    import psutil

    return [a.address for addresses in psutil.net_if_addrs().values() for a in addresses
            if a.family == socket.AF_INET and not a.address.startswith("127.")]
