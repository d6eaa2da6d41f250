"""A local ``mpirun`` job in a network namespace of its own, with only loopback: no other host can reach it.

Open MPI 4.1's ``mpirun`` listens on every address whatever it is told (its out-of-band and PMIx tool listeners), and a
connection that sends it a line of junk and stays open hangs the job for good. Started in a namespace of its own,
``mpirun``, its daemons and the ranks share a loopback that nothing outside the job can reach; the launcher still
reads their output through pipes and their results from the job's folder, as before.

As root the namespace is a plain new network namespace; as another user (or as root without ``CAP_SYS_ADMIN``) it
comes with a user namespace that maps the user to itself (Linux's unprivileged user namespaces), so files and
processes keep their owner. Where neither can be had (a container without the right, a kernel or AppArmor that
forbids it), ``isolation()`` says why, and the launcher says so in one line and runs the job as before.

The ranks then reach nothing beyond loopback either (no DNS, no object store, no download): a body that needs the
network sets ``FLYTE_HOROVOD_MPIRUN_NETWORK=host`` in the launching process's environment, or uses the Gloo
controller.

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
_IFREQ = "16sh22x"  # struct ifreq: the name, the flags, the rest of its 40 bytes

NETWORK_ENV = "FLYTE_HOROVOD_MPIRUN_NETWORK"  # "own" (the default) or "host": the ranks share this host's network
HOW_TO_ALLOW = ("allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
                "kernel.apparmor_restrict_unprivileged_userns=0) or give the container CAP_SYS_ADMIN, or use "
                "Horovod(controller=\"gloo\"), whose local listeners bind loopback")
_made: Optional[Callable[[], None]] = None  # a namespace this process has already made once


def _entering() -> Callable[[], None]:
    """A function that moves the calling process into a new network namespace with loopback up: as root a plain one,
    else (or where root lacks ``CAP_SYS_ADMIN``, as in a container) one inside a user namespace that maps the user to
    itself. Everything it needs is resolved here, so that calling it in a forked child before ``exec`` imports
    nothing."""
    unshare = ctypes.CDLL(None, use_errno=True).unshare
    uid, gid = os.geteuid(), os.getegid()
    maps = [("/proc/self/setgroups", b"deny"), ("/proc/self/uid_map", f"{uid} {uid} 1".encode()),
            ("/proc/self/gid_map", f"{gid} {gid} 1".encode())]

    def enter() -> None:
        if uid != 0 or unshare(_CLONE_NEWNET) != 0:
            if unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            for path, line in maps:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, line)
                finally:
                    os.close(fd)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            flags = struct.unpack("16sh", fcntl.ioctl(sock, _SIOCGIFFLAGS, struct.pack(_IFREQ, b"lo", 0))[:18])[1]
            fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))

    return enter


def _or_exit_with_errno(enter: Callable[[], None]) -> Callable[[], None]:
    """``enter``, for the probe: a failure ends the child with its errno as exit code (a ``preexec_fn``'s own error
    reaches the parent without it)."""
    def probe() -> None:
        try:
            enter()
        except OSError as exc:
            os._exit(exc.errno or 1)
        except BaseException:
            os._exit(255)

    return probe


def isolation() -> Tuple[Optional[Callable[[], None]], str]:
    """``(enter, "")``: a ``preexec_fn`` that starts a process in a network namespace of its own, tried once per
    process on a throwaway one; ``(None, why)`` where this machine does not allow one, or ``NETWORK_ENV=host`` asks
    for none (``why`` is then empty)."""
    global _made
    if os.environ.get(NETWORK_ENV, "own") == "host":
        return None, ""
    if _made is not None:
        return _made, ""
    if not sys.platform.startswith("linux"):
        return None, f"no network namespaces on {sys.platform}"
    enter = _entering()
    try:
        code = subprocess.run(["true"], preexec_fn=_or_exit_with_errno(enter), timeout=30).returncode
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:  # RuntimeError: in a subinterpreter
        return None, f"no network namespace could be made here ({exc})"
    if code != 0:
        reason = os.strerror(code) if code < 255 else "unexpected error"
        return None, f"no network namespace could be made here ({reason}, as user {os.geteuid()})"
    _made = enter
    return enter, ""
