"""Local runs listen on loopback only: ``LOOPBACK_ENV=1`` in a job's environment (set by the local launchers) makes
every listener of the job's processes bind 127.0.0.1, Horovod's own services included (``bind_horovod_to_loopback``).

Loopback is still open to the host's other users; so those servers also serve only connections whose other end
belongs to this process's user (``from_this_user``: the kernel's socket table says who owns the client's socket).
That covers another user's junk before any signature is read (``job_secret.signed_requests_only`` refuses the rest).

No flytekit import: ranks and Spark tasks use this module.
"""

import os
import socket
import struct
from typing import Callable, Optional, Tuple

LOOPBACK_ENV = "FLYTE_HOROVOD_LOOPBACK"
LOOPBACK = "127.0.0.1"


def local_run() -> bool:
    """Whether this process belongs to a local run (its launcher set ``LOOPBACK_ENV``)."""
    return os.environ.get(LOOPBACK_ENV) == "1"


def bind_address() -> str:
    """Where this process's listeners bind: 127.0.0.1 in a local run, else every interface."""
    return LOOPBACK if local_run() else ""


def peer_uid(conn: socket.socket) -> Optional[int]:
    """The user owning the other end of an IPv4 TCP connection on this host (from ``/proc/net/tcp``), else None."""
    def entry(address: Tuple[str, int]) -> str:
        ip, port = address[:2]
        return f"{struct.unpack('<I', socket.inet_aton(ip))[0]:08X}:{port:04X}"

    try:
        theirs, ours = entry(conn.getpeername()), entry(conn.getsockname())
        with open("/proc/net/tcp") as table:
            for line in table:
                fields = line.split()
                if fields[1:3] == [theirs, ours]:
                    return int(fields[7])
    except (OSError, ValueError, struct.error):
        pass
    return None


def from_this_user(conn: socket.socket) -> bool:
    """Whether the other end of ``conn`` is a process of this process's user (on this host)."""
    return peer_uid(conn) == os.getuid()


def serve_this_user_only(server):
    """A ``socketserver`` server (bound to loopback) that closes every connection from another user unanswered."""
    server.verify_request = lambda request, client_address: from_this_user(request)
    return server


def find_port_on(host: str) -> Callable[[Callable[[Tuple[str, int]], object]], Tuple[object, int]]:
    """Horovod's ``find_port`` (a server factory's server, on a free port) binding ``host`` instead of every
    interface (the kernel picks the port); on loopback, serving this user only."""
    def find_port(server_factory):
        server = server_factory((host, 0))
        if host == LOOPBACK:
            serve_this_user_only(server)
        return server, server.socket.getsockname()[1]

    return find_port


def bind_horovod_to_loopback() -> None:
    """In a local run: Horovod's HTTP rendezvous servers and its HMAC services (the elastic workers' notification
    service, the driver and task services) bind 127.0.0.1 in this process."""
    if not local_run():
        return
    from horovod.runner.common.util import network as service_network
    from horovod.runner.http import http_server
    from horovod.runner.util import network

    for module in (network, http_server, service_network):
        module.find_port = find_port_on(LOOPBACK)

