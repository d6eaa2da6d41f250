"""The three watches of one rank process, whatever route started it (a local or Spark rank's ``run_rank``, a cluster
rank's ``mpi.execute_in_world``): every rank reaches ``hvd.init()`` (``joining``), every rank stays alive
(``liveness``), rank 0's stall reports (``stall``). ``RankWatches`` starts them around ``start_rank``, records a
failure after any stall's record and stops them in order; each route says what to do, beyond the record, when a rank
never reached ``hvd.init()`` or was lost.

No flytekit import: rank processes started by Spark tasks use this module.
"""

import logging
import os
from typing import Callable, Optional, Tuple

from .classify import LOST, NEVER_MET, STALLED
from .failures import RankFailures, this_host
from .job_secret import SECRET_ENV, job_secret
from .joining import JoinWatch
from .liveness import Liveness, LostRank
from .rank_exit import flush_streams
from .rank_start import launched_rank, launched_size, start_rank
from .settings import Horovod
from .stall import StallWatch

logger = logging.getLogger("flytekitplugins.horovod")

Report = Callable[[], None]


def _nothing() -> None:
    """The report of a local or Spark rank: its launcher reads the failure record."""


class RankWatches:
    """The join, liveness and stall watches of this rank process, with ``failures`` the job's failure record.

    ``report_missing`` runs when a rank never reached ``hvd.init()``, ``report_lost`` when rank 0 found a rank lost:
    after the failure is recorded, before the process ends (a cluster rank writes ``error.pb``). Use::

        rank, watches = launched_rank() or 0, RankWatches(settings, failures)
        try:
            rank, size = watches.start()
            ...  # the body
        except BaseException as exc:
            watches.record_failure(rank, exc)
            raise
        finally:
            watches.stop()
    """

    def __init__(self, settings: Horovod, failures: RankFailures, report_missing: Report = _nothing,
                 report_lost: Report = _nothing):
        self.settings, self.failures = settings, failures
        self._report_missing, self._report_lost = report_missing, report_lost
        self._joining: Optional[JoinWatch] = None
        self._liveness: Optional[Liveness] = None
        self._stall: Optional[StallWatch] = None

    def start(self) -> Tuple[int, int]:
        """``start_rank`` watched: the join watch before it, the heartbeat and the stall watch after. Returns
        (rank, size)."""
        self._joining = _start_join_watch(self.settings, self.failures, self._report_missing)
        rank, size = start_rank(self.settings)
        self._liveness = _start_liveness(self.settings, rank, size, self.failures, self._report_lost)
        self._stall = _start_stall_watch(self.settings, rank, size, self.failures)
        return rank, size

    def record_failure(self, rank: int, exc: BaseException) -> None:
        """Record ``exc`` as ``rank``'s failure, after the stall watch's record of a stall, if any."""
        if self._stall is not None:
            self._stall.stop()  # its record of a stall comes first: the exception is its echo
        self.failures.record_exception(rank, exc)

    def stop(self) -> None:
        """Stop the watches that started: the join watch, the heartbeat, the stall watch."""
        for watch in (self._joining, self._liveness, self._stall):
            if watch is not None:
                watch.stop()


def _start_join_watch(settings: Horovod, failures: RankFailures, report: Report) -> Optional[JoinWatch]:
    """Before ``start_rank``: watch that every rank reaches ``hvd.init()`` (see ``joining``); when one has not after
    ``start_timeout``, a rank waiting in ``hvd.init()`` records which ranks did and did not reach it, calls ``report``
    and ends its process (it would wait forever under ``mpirun``). None in a world of one rank or an elastic one."""
    rank, size = launched_rank() or 0, launched_size() or 1
    if size < 2 or os.environ.get("HOROVOD_ELASTIC") == "1":
        return None

    def on_missing(text: str) -> None:
        try:
            logger.error("%s; failing the task", text)
            failures.record(rank, NEVER_MET, text)
            report()
        finally:
            flush_streams()
            os._exit(1)

    watch = JoinWatch(rank, size, this_host(), failures.folder, settings.start_timeout, on_missing)
    watch.start()
    return watch


def _start_liveness(settings: Horovod, rank: int, size: int, failures: RankFailures,
                    report: Report) -> Optional[Liveness]:
    """Start this rank's heartbeat (see ``liveness``) right after ``start_rank``, unless the settings turn it off,
    the body initialises Horovod itself, or the world has one rank or is elastic (Horovod's elastic driver handles
    lost hosts).

    When rank 0 finds a rank lost it records that rank's failure, calls ``report`` (which may wait) and ends its
    process (its main thread is stuck in a collective); a rank that lost rank 0 ends without a record: it cannot
    tell whether rank 0's host or its own went away, and rank 0's launcher reports. Without a job secret from the
    launcher (a world started by hand) there is no heartbeat: its hellos could not be told from anyone else's."""
    if settings.lost_rank_timeout is None or settings.framework is None or size < 2 \
            or os.environ.get("HOROVOD_ELASTIC") == "1":
        return None
    if job_secret() is None:
        logger.warning("rank %d: no job secret (%s) from the launcher; the liveness check is off", rank, SECRET_ENV)
        return None
    host = this_host()

    def on_lost(lost: LostRank) -> None:
        try:
            if rank == 0:
                text = lost.describe(f"rank 0 on {host}")
                logger.error("%s; failing the task", text)
                failures.record(lost.rank, LOST, text, host=lost.host, replace=False)
                report()
            else:
                logger.error("%s; stopping this rank", lost.describe(f"rank {rank} on {host}"))
        finally:
            flush_streams()
            os._exit(1)

    liveness = Liveness(rank, size, host, settings.lost_rank_timeout, failures.folder, on_lost)
    liveness.start()
    return liveness


def _start_stall_watch(settings: Horovod, rank: int, size: int, failures: RankFailures) -> Optional[StallWatch]:
    """On rank 0 (Horovod's coordinator, the only rank its stall check runs on) of a world of several ranks, after
    ``start_rank``: watch its stall reports (see ``stall``), the one that stops the ranks recorded as the job's
    failure. None where the stall check is off or the body initialises Horovod itself."""
    if rank != 0 or size < 2 or settings.stall_timeout is None or settings.framework is None:
        return None
    return StallWatch(size, this_host(), settings.stall_timeout,
                      lambda text: failures.record(0, STALLED, text))
