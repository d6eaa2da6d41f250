"""The errors of a Horovod job, as the runtime raises them (which failure is which: ``classify``), with no SDK in them:

- ``RankFailedError``: the task body raised in a rank (a user error: retrying will not help);
- ``StalledRanksError`` (a ``RankFailedError``): ranks out of step for longer than ``Horovod(stall_timeout=...)``;
- ``RankLostError``: a rank was killed or died without an exception, its host or link was lost, or the ranks never
  met; an SDK layer names its own subclass that its SDK retries (``use_lost_error``: flytekit's plugin makes it a
  ``FlyteRecoverableException``), and ``RankFailures.error`` raises that one;
- ``InterruptedByUser``: Ctrl-C, no failure at all.

Both SDK layers (``flytekitplugins.horovod`` and ``flyteplugins.horovod``) export these classes, as they are or as
subclasses their SDK tells apart (retryable or not).
"""

import atexit
import gc
from typing import Optional


class RankFailedError(RuntimeError):
    """The task body raised in a Horovod rank; the message names the rank, its host and carries its traceback."""

    def __init__(self, message: str, rank: Optional[int] = None, host: Optional[str] = None,
                 timestamp: Optional[float] = None):
        super().__init__(message)
        self.rank, self.host, self.timestamp = rank, host, timestamp


class StalledRanksError(RankFailedError):
    """Ranks out of step: some submitted a collective the others never did, for longer than ``stall_timeout``. The
    first line names the tensors, the missing and the waiting ranks, since when, and the usual causes."""


class RankLostError(RuntimeError):
    """A Horovod rank was lost (killed, crashed, host or network gone, never met its peers): a retry may succeed."""

    def __init__(self, message: str, rank: Optional[int] = None, host: Optional[str] = None,
                 timestamp: Optional[float] = None):
        super().__init__(message)
        self.rank, self.host, self.timestamp = rank, host, timestamp

    def __str__(self) -> str:
        return self.args[0]


class InterruptedByUser(RuntimeError):
    """The user interrupted the run (Ctrl-C): no rank failed, and whether to run it again is the user's call."""

    def __init__(self, what: str):
        super().__init__(f"interrupted by the user (Ctrl-C): {what}")


def exit_quickly() -> None:
    """After Ctrl-C the user waits for the prompt: at exit, skip the interpreter's last garbage collections (over
    TensorFlow's, torch's and flytekit's objects they take 1.8 s of CPU on an idle machine, 0.3 s without, and several
    times that on a busy one). Reference counting still frees what it frees."""
    global _exits_quickly
    _exits_quickly = True


def _skip_last_collections() -> None:
    if _exits_quickly:
        gc.disable()
        gc.freeze()


_exits_quickly = False
# registered when the runtime is imported, so that it runs after the atexit handlers registered later (flytekit's,
# Spark's, the task's own) have run with the collector as it was
atexit.register(_skip_last_collections)


_lost_error = RankLostError  # what ``lost_error()`` returns: the SDK layer's own, once one names it


def use_lost_error(error: type) -> None:
    """Make ``error`` (a ``RankLostError`` subclass its SDK retries) the lost-rank error this process raises."""
    global _lost_error
    if not issubclass(error, RankLostError):
        raise TypeError(f"{error.__name__} must subclass {RankLostError.__qualname__}")
    _lost_error = error


def lost_error() -> type:
    """The lost-rank error to raise: the SDK layer's (see ``use_lost_error``), else ``RankLostError``."""
    return _lost_error
