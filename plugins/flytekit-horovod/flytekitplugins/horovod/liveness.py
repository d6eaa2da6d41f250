"""Liveness of a Horovod world's ranks: every rank tells rank 0 once a second that it is alive, rank 0 answers.

A collective whose peer's host or network link is gone waits forever (MPI) or until Gloo's timeout, and then blames
the rank that waited. Here rank 0 notices a rank it has not heard from for ``timeout`` seconds and reports that rank,
with its host, as lost; a rank that has not heard from rank 0 for as long stops. A rank whose process ends closes its
connection, which is not a loss: its launcher reports how it ended.

No flytekit import: rank processes started by Spark tasks use this module.
"""

import contextlib
import logging
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

logger = logging.getLogger("flytekitplugins.horovod")

BEAT_S = 1.0  # how often a rank says it is alive, and rank 0 checks who went silent


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
    """The heartbeat of one rank; ``start`` is a collective (every rank calls it once, after ``hvd.init()``)."""

    def __init__(self, rank: int, size: int, host: str, timeout: float, on_lost: OnLost):
        self.rank, self.size, self.host, self.timeout, self.on_lost = rank, size, host, timeout, on_lost
        self._stop = threading.Event()
        self._sockets: List[socket.socket] = []

    def start(self, hvd: Any) -> None:
        """Rank 0 listens and broadcasts where; the others connect to it. Both then beat in a daemon thread."""
        listener = None
        offer: Tuple[List[str], int] = ([], 0)
        if self.rank == 0:
            listener = socket.create_server(("", 0), backlog=max(self.size, 8))
            self._sockets.append(listener)
            offer = (_local_addresses(), listener.getsockname()[1])
        addresses, port = hvd.broadcast_object(offer, root_rank=0, name="flytekitplugins.horovod.liveness")
        if self.rank == 0:
            target, args = self._serve, (listener,)
        else:
            conn = _connect(addresses, port)
            if conn is None:
                logger.warning("rank %d: cannot reach rank 0's liveness port (%s, port %d); this rank runs without "
                               "a liveness check", self.rank, ", ".join(addresses), port)
                return
            conn.sendall(f"{self.rank} {self.host}\n".encode())
            self._sockets.append(conn)
            target, args = self._beat, (conn,)
        threading.Thread(target=target, args=args, name="horovod-liveness", daemon=True).start()

    def stop(self) -> None:
        """Close the connections: the other ranks see an ended rank, not a lost one."""
        self._stop.set()
        for sock in self._sockets:
            sock.close()

    def _serve(self, listener: socket.socket) -> None:
        """Rank 0: accept the ranks, echo their beats, report the first one silent for ``timeout`` s."""
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ)
        peers: Dict[socket.socket, _Peer] = {}
        while not self._stop.is_set():
            try:
                events = selector.select(BEAT_S)
            except (OSError, ValueError):  # closed by stop()
                return
            now = time.monotonic()
            for key, _ in events:
                if key.fileobj is listener:
                    with contextlib.suppress(OSError):
                        conn, _ = listener.accept()
                        selector.register(conn, selectors.EVENT_READ)
                        peers[conn] = _Peer(now)
                    continue
                conn, peer = key.fileobj, peers[key.fileobj]
                data = _receive(conn)
                if not data:  # the rank's process ended: its launcher reports how
                    selector.unregister(conn)
                    conn.close()
                    peers.pop(conn)
                    continue
                peer.heard(data, now)
                with contextlib.suppress(OSError):
                    conn.sendall(b".")
            for peer in peers.values():
                if peer.rank is not None and now - peer.last > self.timeout and not self._stop.is_set():
                    self.on_lost(LostRank(peer.rank, peer.host, now - peer.last))
                    return

    def _beat(self, conn: socket.socket) -> None:
        """Any other rank: a beat a second; stop (``on_lost``) when rank 0 has been silent for ``timeout`` s."""
        last = time.monotonic()
        conn.settimeout(BEAT_S)
        while not self._stop.is_set():
            try:
                conn.sendall(b".")
                data = conn.recv(4096)
            except socket.timeout:
                data = None
            except OSError:  # rank 0's process ended, or stop() closed the socket
                return
            now = time.monotonic()
            if data == b"":
                return
            if data:
                last = now
                time.sleep(max(0.0, BEAT_S - (time.monotonic() - now)))
            elif now - last > self.timeout and not self._stop.is_set():
                self.on_lost(LostRank(0, "rank 0's host", now - last))
                return


class _Peer:
    """What rank 0 knows of one connected rank: its announced rank and host, when it was last heard."""

    def __init__(self, now: float):
        self.last, self.rank, self.host, self._hello = now, None, "", b""

    def heard(self, data: bytes, now: float) -> None:
        self.last = now
        if self.rank is None:
            self._hello += data
            if b"\n" in self._hello:
                rank, _, host = self._hello.split(b"\n", 1)[0].decode().partition(" ")
                self.rank, self.host = int(rank), host


def _receive(conn: socket.socket) -> bytes:
    try:
        return conn.recv(4096)
    except OSError:
        return b""


def _local_addresses() -> List[str]:
    """Where the other ranks may reach this host: its non-loopback IPv4 addresses, then loopback."""
    import psutil

    found = [a.address for addresses in psutil.net_if_addrs().values() for a in addresses
             if a.family == socket.AF_INET and not a.address.startswith("127.")]
    return found + ["127.0.0.1"]


def _connect(addresses: List[str], port: int) -> Optional[socket.socket]:
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout=3)
        except OSError:
            continue
    return None
