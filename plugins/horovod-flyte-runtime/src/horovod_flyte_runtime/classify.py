"""Which launcher and rank output means which failure: pure functions from text, an exception or an exit status to
the failure's kind, its rank and what to say about it. The one place these rules live; ``failures`` keeps the records
and ``errors`` turns them into the task's error.

No import beyond the standard library: rank processes and Spark tasks (pickled by value) use this module.
"""

import re
import signal
import sys
from typing import NamedTuple, Optional, Tuple

# How a rank failed, as its failure record says.
RAISED, RECOVERABLE_RAISED, DIED, LOST, ECHO = "raised", "raised-recoverable", "died", "lost", "echo"
STALLED = "stalled"  # ranks out of step, stopped by Horovod's stall check (see ``stall``): a user error
NEVER_MET = "never-met"  # a rank never reached hvd.init() within start_timeout (see ``joining``)
# The kinds whose task error is RankLostError (Flyte's retries apply): a rank killed or lost, a body that raised
# FlyteRecoverableException, and an echo with no cause before it (the rank that caused it left no record: killed, or
# its host lost). RAISED alone is a user error (RankFailedError).
RECOVERABLE = (RECOVERABLE_RAISED, DIED, LOST, ECHO, NEVER_MET)
# The kinds whose record's text is the error's first line (it names the ranks itself), recorded by rank 0
TOLD_BY_RANK_0 = (STALLED, NEVER_MET)
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
NO_SPACE = "No space left on device"  # ENOSPC's text, as Python and TensorFlow print it
_SSH_FAILED = 255  # ssh's exit status when the remote command ended without one (killed by a signal) or ssh failed

# A line's rank prefix: ``[1]<stdout>:`` (Gloo, horovodrun, horovod.spark) or ``[1,1]<stderr>:`` (mpirun --tag-output).
_RANK = re.compile(r"\[(?:\d+,)?(\d+)\]<std(?:out|err)>:")
# How mpirun (Open MPI 4) names the rank that failed first.
_MPIRUN_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
_MPIRUN_EXIT = re.compile(r"Process name: \[\[\d+,\d+\],(\d+)\]\s+Exit code:\s+(\d+)")
# How Horovod's own launchers (horovodrun, horovod.spark.run and so the Estimator's SparkBackend) report a rank that
# ended with a non-zero status.
_HOROVOD_EXIT = re.compile(r"exited with non-zero status.*?Process name: (\S+)\s+Exit code: (-?\d+)", re.S)
# The path next to a full disk's message: Python's "[Errno 28] No space left on device: '/p'", TensorFlow's "/p; No
# space ...", Spark's "Task failed while writing rows to file:/p." (its cause, far below, is the message)
_NO_SPACE_PATH = re.compile(rf"{NO_SPACE}: '([^']+)'|(/[^\s;:']+)[;:,]?\s*{NO_SPACE}|writing rows to file:(/\S+?)\.?\s")


class NamedRank(NamedTuple):
    """The rank a launcher's output names as the one that failed first, and what happened to it."""

    rank: int
    text: str


def exception_kind(exc: BaseException) -> str:
    """The failure kind of an exception a rank raised: the launcher stopping it, or a text of ``ECHO_MARKERS``, is an
    echo; a ``FlyteRecoverableException`` is recoverable; anything else was raised by the body."""
    if _is_instance(exc, "flytekitplugins.horovod.errors", "LauncherStopped"):
        return ECHO
    if _is_instance(exc, "flytekit.exceptions.user", "FlyteRecoverableException"):
        return RECOVERABLE_RAISED
    text = f"{type(exc).__name__}: {exc}"
    return ECHO if any(marker in text for marker in ECHO_MARKERS) else RAISED


def _is_instance(exc: BaseException, module: str, name: str) -> bool:
    """``isinstance(exc, module.name)`` without importing ``module``: an instance exists only once it is imported."""
    cls = getattr(sys.modules.get(module), name, None)
    return cls is not None and isinstance(exc, cls)


def headline(kind: str, rank: int, host: str) -> str:
    """The first line of a rank's failure of ``kind``: ``Horovod rank 1 died on host h``."""
    verb = {RAISED: "failed", RECOVERABLE_RAISED: "failed", DIED: "died", LOST: "was lost", ECHO: "failed",
            STALLED: "stopped the ranks out of step", NEVER_MET: "waited for ranks that never met"}
    return f"Horovod rank {rank} {verb[kind]} on host {host}"


def describe_status(code: int) -> str:
    """``exited with status 3`` or ``was killed by SIGKILL`` for a ``Popen.returncode``."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def rank_of(line: str) -> Optional[int]:
    """The rank a launcher's output line comes from, or None for a line of no rank."""
    found = _RANK.match(line)
    return int(found.group(1)) if found else None


def rank_text(line: str) -> str:
    """A launcher's output line as its rank printed it: without the rank prefix."""
    found = _RANK.match(line)
    return line[found.end():] if found else line


def mpirun_failed_rank(output: str) -> Optional[NamedRank]:
    """The rank mpirun says failed first, from its closing message, if it says."""
    match = _MPIRUN_SIGNAL.search(output)
    if match:
        rank, node, sig = match.groups()
        return NamedRank(int(rank), f"rank {rank} on node {node} {describe_status(-int(sig))} (reported by mpirun)")
    match = _MPIRUN_EXIT.search(output)
    if match:
        rank, code = match.groups()
        return NamedRank(int(rank), f"rank {rank} exited with status {code} without raising an exception (reported by "
                                    "mpirun)")
    return None


def horovod_launcher_exit(text: str) -> Optional[Tuple[str, int, Optional[int]]]:
    """(process name, exit code, signal number or None) of the first rank Horovod's launchers report ended with a
    non-zero status; the signal is read from exit code -N, or 128+N (N up to 64) from a shell. None when ``text``
    reports none."""
    found = _HOROVOD_EXIT.search(text)
    if found is None:
        return None
    code = int(found.group(2))
    return found.group(1), code, -code if code < 0 else code - 128 if 128 < code <= 128 + 64 else None


def launcher_failed_rank(output: str) -> Optional[NamedRank]:
    """The rank a cluster's launcher (``mpirun``, else ``horovodrun``) says failed first, if it names one."""
    named = mpirun_failed_rank(output)
    exited = horovod_launcher_exit(output) if named is None else None
    if exited is None or not exited[0].isdigit():
        return named
    name, code, signal_number = exited
    how = f"{describe_status(-signal_number)} (exit code {code})" if signal_number else describe_status(code)
    if code == _SSH_FAILED:
        how += " (horovodrun ran it over ssh, which exits 255 when the remote process is killed by a signal or the " \
               "connection is lost)"
    return NamedRank(int(name), f"rank {name} {how}, reported by horovodrun")


def spark_rank_killed(text: str) -> Optional[Tuple[Optional[int], str]]:
    """(rank or None, message) when Horovod's launcher on Spark reports a rank ended by a signal (the OOM killer, a
    lost executor); None for any other text (a rank that raised exits with 1)."""
    exited = horovod_launcher_exit(text)
    if exited is None or exited[2] is None:
        return None
    name, code, signal_number = exited
    return (int(name) if name.isdigit() else None,
            f"Horovod rank {name} {describe_status(-signal_number)} (exit code {code}) in its Spark task, as when it "
            "runs out of memory or its executor is lost; a retry may succeed")


def no_space_path(text: str) -> str:
    """The path a full disk's message (or a line naming one) names, or ``(path not given)``."""
    found = _NO_SPACE_PATH.search(text)
    return next((g for g in found.groups() if g), "") if found else "(path not given)"
