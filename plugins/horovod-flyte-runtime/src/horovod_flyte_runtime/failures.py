"""Rank failures: what each rank (or its supervisor) records, and the one error a task raises for them.

Every launcher shares one folder (a local path or any fsspec URL the ranks can reach) where each failed rank gets
one JSON record: its rank, host, when, how it failed (a kind of ``classify``) and the text to show. The task then
raises one error (see ``errors``) naming the rank and host that really failed. When one rank fails, the others fail
next as its echo ("Horovod has been shut down", a closed Gloo connection); those records are kept, but never
reported as the cause while a rank has a cause of its own.

No flytekit import at module level (the error classes are imported where an error is made): rank processes and
Spark tasks (pickled by value) record failures with it.
"""

import json
import os
import socket
import time
import traceback
from dataclasses import dataclass
from typing import List, Optional

import fsspec

from .classify import ECHO, RECOVERABLE, STALLED, TOLD_BY_RANK_0, exception_kind, headline
from .errors import RankFailedError, RankLostError, StalledRanksError, lost_error

_PLUGIN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the plugin, not only executor/


@dataclass
class RankFailure:
    rank: int
    host: str
    time: float
    kind: str
    text: str

    def headline(self) -> str:
        return headline(self.kind, self.rank, self.host)


HOST_ENV = "FLYTE_HOROVOD_HOST"  # this_host() as the launcher saw it, for ranks that cannot see the host's addresses


def this_host() -> str:
    """How a person finds this machine: ``hostname (address)``, the address its ranks are known by (Horovod's
    ``HOROVOD_HOSTNAME``) or else its first non-loopback address; in a rank of a local ``mpirun`` job (a network
    namespace of its own, ``own_network``), the launcher's, which it passes as ``HOST_ENV``."""
    from .liveness import ipv4_addresses

    if os.environ.get(HOST_ENV):
        return os.environ[HOST_ENV]
    name = socket.gethostname()
    address = os.environ.get("HOROVOD_HOSTNAME", "")
    if not address or address.startswith("127.") or address == "localhost":
        address = next(iter(ipv4_addresses()), "")
    return f"{name} ({address})" if address and address != name else name


def record_failure(folder: str, rank: int, kind: str, text: str, replace: bool = True,
                   host: Optional[str] = None) -> None:
    """Write one rank's failure record into ``folder`` (whole, then renamed); its host is this one unless given.

    A plain function (not a ``RankFailures`` method): Spark tasks run it pickled by value, without the class.
    """
    fs, _, (root,) = fsspec.get_fs_token_paths(folder)
    path = f"{root}/rank-{rank}.json"
    if not replace and fs.exists(path):
        return
    tmp = f"{root}/.tmp-rank-{rank}-{os.getpid()}"
    # a plain dict: a dataclass pickled by value into a Spark task loses its fields (asdict gives {})
    record = {"rank": rank, "host": host or this_host(), "time": time.time(), "kind": kind, "text": text}
    for attempt in range(3):
        fs.makedirs(root, exist_ok=True)
        try:
            fs.pipe_file(tmp, json.dumps(record).encode())
            break
        except FileNotFoundError:  # rank 0's liveness thread removed the folder while it was empty (_unpublish)
            if attempt == 2:
                raise
    fs.mv(tmp, path)


class RankFailures:
    """The failure records of one Horovod job, in a folder every rank can reach."""

    def __init__(self, folder: str):
        self.folder = folder.rstrip("/")
        self.fs, _, (self.root,) = fsspec.get_fs_token_paths(self.folder)

    def record(self, rank: int, kind: str, text: str, replace: bool = True, host: Optional[str] = None) -> None:
        """Write rank ``rank``'s failure (on ``host``, default this one); with ``replace=False`` only if it has none
        yet."""
        record_failure(self.folder, rank, kind, text, replace, host)

    def record_exception(self, rank: int, exc: BaseException) -> None:
        """Record what a rank raised, its traceback starting at the first frame outside this plugin; an echo never
        replaces a cause the rank recorded before (rank 0's stall report, then the shutdown it caused)."""
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(_PLUGIN_DIR):
            tb = tb.tb_next
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        kind = exception_kind(exc)
        self.record(rank, kind, text, replace=kind != ECHO)

    def failures(self) -> List[RankFailure]:
        """Every recorded failure: causes first (user errors and lost ranks, earliest first), then echoes."""
        self.fs.invalidate_cache()
        records = []
        for path in self.fs.glob(f"{self.root}/rank-*.json") if self.fs.exists(self.root) else []:
            records.append(RankFailure(**json.loads(self.fs.cat(path).decode())))
        return sorted(records, key=lambda f: (f.kind == ECHO, f.time))

    def any(self) -> bool:
        return self.fs.exists(self.root) and bool(self.fs.glob(f"{self.root}/rank-*.json"))

    def stalled(self) -> bool:
        """Whether rank 0 recorded that Horovod's stall check stopped the ranks (see ``stall``)."""
        return any(f.kind == STALLED for f in self.failures())

    def has_cause(self) -> bool:
        """Whether a rank recorded a cause of its own (not an echo): the failure can be attributed now."""
        return any(f.kind != ECHO for f in self.failures())

    def error(self, launcher_error: BaseException) -> Exception:
        """One error for the task: the first cause, with its rank, host and text, and who failed after it."""
        failures = self.failures()
        if not failures and isinstance(launcher_error, (RankFailedError, RankLostError)):
            return launcher_error
        if not failures:
            return lost_error()(f"Horovod job failed before any rank reported an error: {launcher_error}")
        first, others = failures[0], failures[1:]
        after = ""
        if others:
            ranks = ", ".join(f"{f.rank} on {f.host}" for f in others)
            after = f"; {'rank' if len(others) == 1 else 'ranks'} {ranks} failed after it, as a consequence"
        if first.kind == ECHO:
            after += "; no rank reported a cause of its own: a rank may have been killed or its host lost"
        error = StalledRanksError if first.kind == STALLED else lost_error() if first.kind in RECOVERABLE \
            else RankFailedError
        if first.kind in TOLD_BY_RANK_0:  # its text names the tensors and ranks: the first line
            return error(f"{first.text.rstrip()}{after}", rank=first.rank, host=first.host, timestamp=first.time)
        message = f"{first.headline()}{after}:\n{first.text.rstrip()}"
        return error(message, rank=first.rank, host=first.host, timestamp=first.time)

    def clear(self) -> None:
        if self.fs.exists(self.root):
            self.fs.rm(self.root, recursive=True)


def job_failures(raw_output_prefix: str) -> RankFailures:
    """The failure folder of a launched world: under the task's raw output prefix, which every rank and the launcher
    of one attempt share."""
    return RankFailures(f"{raw_output_prefix.rstrip('/')}/horovod-failures")
