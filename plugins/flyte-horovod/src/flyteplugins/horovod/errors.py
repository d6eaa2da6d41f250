"""The errors a Flyte 2 Horovod task raises for its ranks: the runtime's, made Flyte 2's where Flyte 2 must tell them
apart.

Flyte 2 retries every error a task raises, up to the task's ``retries``, unless it is a
``flyte.errors.NonRecoverableError`` (``flyte/_internal/runtime/convert.py``: ``Error.recoverable``; the local
controller and the backend both skip the remaining attempts for one). A rank whose body raised, and ranks out of step,
fail the same way on every attempt, so ``RankFailedError`` and ``StalledRanksError`` here are also
``NonRecoverableError`` s, and a task's retries are kept for what a retry can mend: a lost rank (``RankLostError``,
left retryable).
"""

from typing import Optional

import flyte.errors

from horovod_flyte_runtime import errors as _runtime
from horovod_flyte_runtime.errors import RankLostError

__all__ = ["RankFailedError", "RankLostError", "StalledRanksError", "as_flyte_error"]


class RankFailedError(_runtime.RankFailedError, flyte.errors.NonRecoverableError):
    """The task body raised in a Horovod rank (the message names the rank, its host, and carries its traceback): not
    retried, its code is ``RankFailedError``."""

    def __init__(self, message: str, rank: Optional[int] = None, host: Optional[str] = None,
                 timestamp: Optional[float] = None):
        flyte.errors.NonRecoverableError.__init__(self, message, code=type(self).__name__)
        self.rank, self.host, self.timestamp = rank, host, timestamp


class StalledRanksError(RankFailedError, _runtime.StalledRanksError):
    """Ranks out of step for longer than ``stall_timeout``: not retried, its code is ``StalledRanksError``."""


def as_flyte_error(exc: _runtime.RankFailedError) -> RankFailedError:
    """The runtime's ``exc`` as this module's error of the same kind, with its message, rank, host and time."""
    kind = StalledRanksError if isinstance(exc, _runtime.StalledRanksError) else RankFailedError
    return kind(str(exc), exc.rank, exc.host, exc.timestamp)
