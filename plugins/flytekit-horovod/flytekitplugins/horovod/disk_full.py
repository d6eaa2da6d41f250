"""A full disk, wherever a rank or the task met it: one recoverable error whose first line names the path.

A rank that cannot write (TensorBoard logs, a checkpoint, the Estimator's store) exits with 1 and Horovod's launcher
reports only "one or more processes exited with non-zero status"; the cause is in the rank's output. A retry on
another machine (or after space is freed) may succeed, so it is a ``FlyteRecoverableException``.
"""

import errno
import functools
from typing import Callable, Optional

from flytekit.exceptions.user import FlyteRecoverableException

from horovod_flyte_runtime.classify import NO_SPACE, no_space_path

from .errors import RankFailedError, RankLostError


class DiskFullError(FlyteRecoverableException):
    """No space was left on a device the task or a rank wrote to; a retry elsewhere may succeed."""

    def __str__(self) -> str:  # FlyteException's str() wraps the message as "error=..."; keep it readable
        return self.args[0]


def disk_full_error(exc: BaseException, rank_line: Optional[str] = None,
                    rank: Optional[int] = None) -> Optional[DiskFullError]:
    """A ``DiskFullError`` for ``exc`` when it is a full disk (``OSError`` ENOSPC, or an error whose text names one,
    such as Spark's), or when rank ``rank`` printed ``rank_line``, its first line naming a full disk; None otherwise.
    A rank's failure (``RankFailedError``, ``RankLostError``) whose record names a full disk is that rank's."""
    if rank_line is None and isinstance(exc, (RankFailedError, RankLostError)) and NO_SPACE in str(exc):
        rank_line, rank = next(line for line in str(exc).splitlines() if NO_SPACE in line), exc.rank
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        # a copy or a move (shutil, fsspec) names its source first: the full disk is the destination's
        where, who = exc.filename2 or exc.filename or "(path not given)", "the task"
    elif rank_line is not None or NO_SPACE in str(exc):
        where = no_space_path(rank_line if rank_line is not None else str(exc))
        who = "the task" if rank_line is None else f"Horovod rank {rank}" if rank is not None else "a Horovod rank"
    else:
        return None
    return DiskFullError(f"{NO_SPACE}: {where} (written by {who}): free space there or give the task more disk "
                         "(a task's outputs, scratch and logs are under its working directory); a retry elsewhere may "
                         "succeed")


def names_a_full_disk(fn: Callable) -> Callable:
    """Decorator: a full disk met by ``fn`` (in Python or in Spark's JVM) becomes a ``DiskFullError``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            full = disk_full_error(exc)
            if full is None:
                raise
            raise full from exc

    return wrapper
