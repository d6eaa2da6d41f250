"""The errors a Horovod task raises for its ranks' failures (which failure is which: ``classify``):

- ``RankFailedError``: the task body raised in a rank (a user error: retrying will not help);
- ``StalledRanksError`` (a ``RankFailedError``): ranks out of step for longer than ``Horovod(stall_timeout=...)``,
  stopped by Horovod's stall check; a retry would stall the same way;
- ``RankLostError`` (a ``FlyteRecoverableException``, so Flyte's ``retries`` re-run the task): a rank was killed or
  died without an exception (signal, OOM killer, native crash), its host or link was lost, the ranks never met
  (rendezvous timeout), or the body raised ``FlyteRecoverableException`` itself;
- ``LauncherStopped``: this rank was stopped by its launcher, as a consequence of another rank's failure;
- ``InterruptedByUser``: Ctrl-C, no failure at all.
"""

from typing import Optional

from flytekit.exceptions.user import FlyteRecoverableException

from horovod_flyte_runtime import errors as _runtime
from horovod_flyte_runtime.classify import spark_rank_killed
from horovod_flyte_runtime.errors import InterruptedByUser, RankFailedError, StalledRanksError

__all__ = ["InterruptedByUser", "LauncherStopped", "RankFailedError", "RankLostError", "StalledRanksError",
           "lost_in_horovod_launcher"]


class RankLostError(_runtime.RankLostError, FlyteRecoverableException):
    """A Horovod rank was lost (killed, crashed, host or network gone, never met its peers): Flyte may retry.

    The runtime's ``RankLostError`` made a ``FlyteRecoverableException`` (the runtime raises it once this module is
    imported: ``use_lost_error`` below). Its timestamp is when the rank failed, so Flyte's "earliest error" strategy
    for distributed tasks (flyte RFC 5598) picks it over the echoes of other ranks."""

    def __init__(self, message: str, rank: Optional[int] = None, host: Optional[str] = None,
                 timestamp: Optional[float] = None):
        FlyteRecoverableException.__init__(self, message, timestamp=timestamp)
        self.rank, self.host = rank, host

    def __str__(self) -> str:  # FlyteException's str() wraps the message as "error=..."; keep it readable
        return self.args[0]


_runtime.use_lost_error(RankLostError)


class LauncherStopped(FlyteRecoverableException):
    """This rank was stopped by its launcher (SIGTERM): ``horovodrun`` and ``mpirun`` stop every rank when one
    failed or was lost, so it is a consequence, and a retry may succeed."""

    def __str__(self) -> str:
        return self.args[0]


def lost_in_horovod_launcher(exc: BaseException) -> Optional[RankLostError]:
    """A ``RankLostError`` for Horovod's launcher error about a rank ended by a signal (the OOM killer, a lost
    executor); None for any other error (a rank that raised exits with 1)."""
    killed = spark_rank_killed(str(exc))
    return None if killed is None else RankLostError(killed[1], rank=killed[0])
