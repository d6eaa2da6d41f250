"""A local ``mpirun`` job in a network namespace of its own, with only loopback: no other host can reach it.

Open MPI 4.1's ``mpirun`` listens on every address whatever it is told (its out-of-band and PMIx tool listeners), and a
connection that sends it a line of junk and stays open hangs the job for good. Started in a namespace of its own,
``mpirun``, its daemons and the ranks share a loopback that nothing outside the job can reach; the launcher still
reads their output through pipes and their results from the job's folder, as before.

As root the namespace is a plain new network namespace; as another user it comes with a user namespace that maps
the user to itself (Linux's unprivileged user namespaces), so files and processes keep their owner. Where neither can
be had (a container without the right, a kernel or AppArmor that forbids it), ``isolation()`` says why, and the
launcher says so in one line and runs the job as before.

No flytekit import: the runtime that both plugins share uses this module.
"""

import ctypes
import fcntl
import os
import socket
import struct
import subprocess
import sys
from typing import Callable, Optional, Tuple

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1

HOW_TO_ALLOW = ("run as root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
                "on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0), or use Horovod(controller=\"gloo\"), "
                "whose local listeners bind loopback")


def _entering() -> Callable[[], None]:
    """A function that moves the calling process into a new network namespace with loopback up. Everything it needs is
    resolved here, so that calling it in a forked child before ``exec`` imports nothing."""
    unshare = ctypes.CDLL(None, use_errno=True).unshare
    root, uid, gid = os.geteuid() == 0, os.getuid(), os.getgid()
    maps = [("/proc/self/setgroups", b"deny"), ("/proc/self/uid_map", f"{uid} {uid} 1".encode()),
            ("/proc/self/gid_map", f"{gid} {gid} 1".encode())]

    def enter() -> None:
        if unshare(_CLONE_NEWNET if root else _CLONE_NEWUSER | _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        for path, line in [] if root else maps:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            flags = struct.unpack("16sh", fcntl.ioctl(sock, _SIOCGIFFLAGS, struct.pack("16sh14x", b"lo", 0))[:18])[1]
            fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sh14x", b"lo", flags | _IFF_UP))

    return enter


def isolation() -> Tuple[Optional[Callable[[], None]], str]:
    """``(enter, "")``: a ``preexec_fn`` that starts a process in a network namespace of its own, tried once here on
    a throwaway process; or ``(None, why)`` where this machine does not allow one."""
    if not sys.platform.startswith("linux"):
        return None, f"no network namespaces on {sys.platform}"
    try:
        enter = _entering()
        subprocess.run(["true"], preexec_fn=enter, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError, AttributeError) as exc:
        return None, f"no network namespace could be made here ({exc})"
    return enter, ""
