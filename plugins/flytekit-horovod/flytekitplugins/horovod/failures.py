"""Rank failures: what each rank (or its supervisor) records, and the one error a task raises for them.

Every launcher shares one folder (a local path or any fsspec URL the ranks can reach) where each failed rank gets
one JSON record: its rank, host, when, how it failed and the text to show. The task then raises one error naming
the rank and host that really failed:

- ``RankFailedError``: the task body raised in a rank (a user error: retrying will not help);
- ``RankLostError`` (a ``FlyteRecoverableException``, so Flyte's ``retries`` re-run the task): a rank was killed or
  died without an exception (signal, OOM killer, native crash), its host or link was lost, the ranks never met
  (rendezvous timeout), or the body raised ``FlyteRecoverableException`` itself.

When one rank fails, the others fail next as its echo ("Horovod has been shut down", a closed Gloo connection);
those records are kept, but never reported as the cause while a rank has a cause of its own.
"""

import json
import os
import re
import socket
import time
import traceback
from dataclasses import dataclass
from typing import List, Optional, Tuple

import fsspec
from flytekit.exceptions.user import FlyteRecoverableException

# How a rank failed; RECOVERABLE kinds become RankLostError.
RAISED, RECOVERABLE_RAISED, DIED, LOST, ECHO = "raised", "raised-recoverable", "died", "lost", "echo"
RECOVERABLE = (RECOVERABLE_RAISED, DIED, LOST)
_PLUGIN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Texts of the errors a rank gets when ANOTHER rank failed or left (Horovod's shutdown, Gloo's broken connections).
ECHO_MARKERS = (
    "Horovod has been shut down",
    "HorovodInternalError",
    "gloo::IoException",
    "Connection closed by peer",
    "Connection reset by peer",
    "ranks finished execution",
    "Broken pipe",
)


class RankFailedError(RuntimeError):
    """The task body raised in a Horovod rank; the message names the rank, its host and carries its traceback."""

    def __init__(self, message: str, rank: Optional[int] = None, host: Optional[str] = None,
                 timestamp: Optional[float] = None):
        super().__init__(message)
        self.rank, self.host, self.timestamp = rank, host, timestamp


class RankLostError(FlyteRecoverableException):
    """A Horovod rank was lost (killed, crashed, host or network gone, never met its peers): Flyte may retry.

    Its timestamp is when the rank failed, so Flyte's "earliest error" strategy for distributed tasks (flyte RFC
    5598) picks it over the echoes of other ranks."""

    def __init__(self, message: str, rank: Optional[int] = None, host: Optional[str] = None,
                 timestamp: Optional[float] = None):
        super().__init__(message, timestamp=timestamp)
        self.rank, self.host = rank, host

    def __str__(self) -> str:  # FlyteException's str() wraps the message as "error=..."; keep it readable
        return self.args[0]


@dataclass
class RankFailure:
    rank: int
    host: str
    time: float
    kind: str
    text: str

    def headline(self) -> str:
        verb = {RAISED: "failed", RECOVERABLE_RAISED: "failed", DIED: "died", LOST: "was lost", ECHO: "failed"}
        return f"Horovod rank {self.rank} {verb[self.kind]} on host {self.host}"


def this_host() -> str:
    """How a person finds this machine: ``hostname (address)``, the address its ranks are known by (Horovod's
    ``HOROVOD_HOSTNAME``) or else its first non-loopback address."""
    from .liveness import ipv4_addresses

    name = socket.gethostname()
    address = os.environ.get("HOROVOD_HOSTNAME", "")
    if not address or address.startswith("127.") or address == "localhost":
        address = next(iter(ipv4_addresses()), "")
    return f"{name} ({address})" if address and address != name else name


class InterruptedByUser(RuntimeError):
    """The user interrupted the run (Ctrl-C): no rank failed, and whether to run it again is the user's call."""

    def __init__(self, what: str):
        super().__init__(f"interrupted by the user (Ctrl-C): {what}")


class LauncherStopped(FlyteRecoverableException):
    """This rank was stopped by its launcher (SIGTERM): ``horovodrun`` and ``mpirun`` stop every rank when one
    failed or was lost, so it is a consequence, and a retry may succeed."""

    def __str__(self) -> str:
        return self.args[0]


def classify(exc: BaseException) -> str:
    """The failure kind of an exception raised in a rank."""
    if isinstance(exc, LauncherStopped):
        return ECHO
    if isinstance(exc, FlyteRecoverableException):
        return RECOVERABLE_RAISED
    text = f"{type(exc).__name__}: {exc}"
    return ECHO if any(marker in text for marker in ECHO_MARKERS) else RAISED


# How Horovod's own launchers (horovodrun, horovod.spark.run and so the Estimator's SparkBackend) report a rank that
# ended with a non-zero status.
_HOROVOD_EXIT = re.compile(r"exited with non-zero status.*?Process name: (\S+)\s+Exit code: (-?\d+)", re.S)


def horovod_launcher_exit(text: str) -> Optional[Tuple[str, int, Optional[int]]]:
    """(process name, exit code, signal number or None) of the first rank Horovod's launchers report ended with a
    non-zero status; the signal is read from exit code -N, or 128+N (N up to 64) from a shell. None when ``text``
    reports none."""
    found = _HOROVOD_EXIT.search(text)
    if found is None:
        return None
    code = int(found.group(2))
    return found.group(1), code, -code if code < 0 else code - 128 if 128 < code <= 128 + 64 else None


def lost_in_horovod_launcher(exc: BaseException) -> Optional[RankLostError]:
    """A ``RankLostError`` for Horovod's launcher error about a rank ended by a signal (the OOM killer, a lost
    executor); None for any other error (a rank that raised exits with 1)."""
    from .processes import describe_status

    exited = horovod_launcher_exit(str(exc))
    if exited is None or exited[2] is None:
        return None
    name, code, signal_number = exited
    return RankLostError(f"Horovod rank {name} {describe_status(-signal_number)} (exit code {code}) in its Spark "
                         "task, as when it runs out of memory or its executor is lost; a retry may succeed",
                         rank=int(name) if name.isdigit() else None)


def record_failure(folder: str, rank: int, kind: str, text: str, replace: bool = True,
                   host: Optional[str] = None) -> None:
    """Write one rank's failure record into ``folder`` (whole, then renamed); its host is this one unless given.

    A plain function (not a ``RankFailures`` method) so that Spark tasks can run it pickled by value without the
    error classes, which import flytekit.
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
        """Record what a rank raised, its traceback starting at the first frame outside this plugin."""
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(_PLUGIN_DIR):
            tb = tb.tb_next
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        self.record(rank, classify(exc), text)

    def failures(self) -> List[RankFailure]:
        """Every recorded failure: causes first (user errors and lost ranks, earliest first), then echoes."""
        self.fs.invalidate_cache()
        records = []
        for path in self.fs.glob(f"{self.root}/rank-*.json") if self.fs.exists(self.root) else []:
            records.append(RankFailure(**json.loads(self.fs.cat(path).decode())))
        return sorted(records, key=lambda f: (f.kind == ECHO, f.time))

    def any(self) -> bool:
        return self.fs.exists(self.root) and bool(self.fs.glob(f"{self.root}/rank-*.json"))

    def has_cause(self) -> bool:
        """Whether a rank recorded a cause of its own (not an echo): the failure can be attributed now."""
        return any(f.kind != ECHO for f in self.failures())

    def error(self, launcher_error: BaseException) -> Exception:
        """One error for the task: the first cause, with its rank, host and text, and who failed after it."""
        failures = self.failures()
        if not failures and isinstance(launcher_error, (RankFailedError, RankLostError)):
            return launcher_error
        if not failures:
            return RankLostError(f"Horovod job failed before any rank reported an error: {launcher_error}")
        first, others = failures[0], failures[1:]
        after = ""
        if others:
            ranks = ", ".join(f"{f.rank} on {f.host}" for f in others)
            after = f"; {'rank' if len(others) == 1 else 'ranks'} {ranks} failed after it, as a consequence"
        if first.kind == ECHO:
            after += "; no rank reported a cause of its own: a rank may have been killed or its host lost"
        message = f"{first.headline()}{after}:\n{first.text.rstrip()}"
        recoverable = first.kind in RECOVERABLE or first.kind == ECHO
        error = RankLostError if recoverable else RankFailedError
        return error(message, rank=first.rank, host=first.host, timestamp=first.time)

    def clear(self) -> None:
        if self.fs.exists(self.root):
            self.fs.rm(self.root, recursive=True)


def job_failures(raw_output_prefix: str) -> RankFailures:
    """The failure folder of a launched world: under the task's raw output prefix, which every rank and the launcher
    of one attempt share."""
    return RankFailures(f"{raw_output_prefix.rstrip('/')}/horovod-failures")
