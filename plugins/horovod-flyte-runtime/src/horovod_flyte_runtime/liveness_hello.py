"""The handshake on rank 0's liveness port (see ``liveness``): rank 0 greets each connection with a random challenge,
a rank answers with its hello, ``<rank> <host> <HMAC of the challenge, rank and host under the job secret>``, and
``Peer`` is what rank 0 knows of one connection, proven or not.

No flytekit import: rank processes started by Spark tasks use this module.
"""

import os
import socket
from typing import Optional

from .job_secret import sign, verify

HELLO_MAX = 1024  # the longest hello (bytes)


def hello(secret: Optional[bytes], nonce: str, rank: int, host: str) -> bytes:
    """A rank's answer to rank 0's challenge ``nonce``: its rank and host, signed with the job's secret."""
    text = f"{rank} {host}"
    return f"{text} {sign(secret, f'{nonce} {text}'.encode())}\n".encode()


class Peer:
    """What rank 0 knows of one connection: the challenge it was sent, when it came and was last heard, and once its
    hello proved the job's secret, its rank and host."""

    def __init__(self, now: float):
        self.since = self.last = now
        self.nonce = os.urandom(16).hex()
        self.rank: Optional[int] = None
        self.host, self._hello = "", b""

    def heard(self, data: bytes, now: float, secret: Optional[bytes], size: int) -> bool:
        """Take ``data`` from this connection; False when it is not a rank of this job (a hello that is too long,
        malformed, names no other rank of the world, or lacks the proof of ``secret``)."""
        self.last = now
        if self.rank is not None:
            return True
        self._hello += data
        if b"\n" not in self._hello:
            return len(self._hello) <= HELLO_MAX
        text, _, digest = self._hello.split(b"\n", 1)[0].decode("utf-8", "replace").rpartition(" ")
        rank, _, host = text.partition(" ")
        if not (rank.isdigit() and 0 < int(rank) < size and verify(secret, f"{self.nonce} {text}".encode(), digest)):
            return False
        self.rank, self.host = int(rank), host
        return True


def send_line(conn: socket.socket, line: str) -> bool:
    try:
        conn.sendall(f"{line}\n".encode())
        return True
    except OSError:
        return False


def read_line(conn: socket.socket) -> str:
    """One line from ``conn`` (rank 0's challenge), at most ``HELLO_MAX`` bytes; ``OSError`` if none comes."""
    data = b""
    while b"\n" not in data and len(data) <= HELLO_MAX:
        chunk = conn.recv(HELLO_MAX)
        if not chunk:
            raise ConnectionError("rank 0 closed its liveness connection before its challenge")
        data += chunk
    return data.split(b"\n", 1)[0].decode("ascii", "replace")


def receive(conn: socket.socket) -> bytes:
    try:
        return conn.recv(4096)
    except OSError:
        return b""
