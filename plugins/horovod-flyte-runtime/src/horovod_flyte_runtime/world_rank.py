"""One rank of a world a cluster launcher started (``mpirun`` or ``horovodrun`` in the MPI operator's launcher pod):
the body run once, watched, with the job's failure record, whichever Flyte runs the rank (flytekit's
``pyflyte-execute`` in ``mpi.execute_in_world``, Flyte 2's ``a0`` in ``flyteplugins.horovod``).

Every rank reports the first rank that failed, with its host and traceback, read from a folder all ranks share
(``failures``), never its own echo of it ("Horovod has been shut down"). A rank that goes silent (host or link lost)
is found by the heartbeat (``liveness``): rank 0 writes the task's error itself, through ``write_error``.

No flytekit import.
"""

import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple

from .errors import StalledRanksError, lost_error
from .failures import RankFailures
from .launcher_exit import mark_this_rank_returned
from .mpirun_keepalive import mpirun_notices_lost_host_within
from .processes import pdeathsig_setter
from .rank_exit import flush_streams
from .rank_start import current_rank, launched_rank, launched_size
from .rank_watches import RankWatches
from .settings import ARTIFACTS, Horovod

logger = logging.getLogger("flytekitplugins.horovod")


@dataclass
class WorldRank:
    """What the Flyte SDK running this rank provides: the task's name, the job's failure record (under the task's raw
    output prefix), ``write_error`` (writes the task's error document now, from any thread) and ``stopped`` (the
    exception for "the launcher stopped this rank": a consequence of another rank's failure, retryable)."""

    task: str
    failures: RankFailures
    write_error: Callable[[BaseException], None]
    stopped: Callable[[str], BaseException]


def run_in_world(world: WorldRank, body: Callable, kwargs: Dict[str, Any], settings: Horovod) -> Tuple[int, Any]:
    """Run ``body(**kwargs)`` once as this launched rank; returns (rank, result). A failure raises the job's first
    failure (rank 0 waits briefly for it); a stall, or a rank the launcher stopped, writes the error and exits
    non-zero at once."""
    if os.environ.get("HOROVOD_ELASTIC") == "1":
        # horovodrun starts a remote rank over ssh without a terminal: when the launcher stops it (a stall), sshd
        # sends the rank no SIGHUP, and a rank stuck in its own code would outlive the job; it ends with its sshd
        pdeathsig_setter(signal.SIGKILL)()
    settings.check_framework()  # a framework this image's Horovod lacks: the same error, first, on every rank
    rank, size = launched_rank(), launched_size()
    failures = world.failures
    logger.info("rank %s of %s: running %s inside the launched world", rank, size, world.task)
    stopped: List[bool] = []

    def on_sigterm(signum, frame):
        # the launcher stops every rank when one failed or was lost: fail as a recoverable consequence, at once,
        # so that the error document is written before the launcher's SIGKILL follows
        stopped.append(True)
        raise world.stopped(f"rank {rank} was stopped by its launcher (SIGTERM): another rank failed or was lost")

    # signal handlers can only be set from the main thread (where pyflyte-execute runs the task)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if in_main else None

    def report_missing_rank() -> None:  # from the join watch: this rank waits in hvd.init() for a rank that never came
        world.write_error(failures.error(lost_error()("a rank never reached hvd.init()")))

    def report_lost_rank() -> None:  # from the liveness thread: this rank's main thread is stuck in a collective
        world.write_error(failures.error(lost_error()("a rank was lost")))
        if "OMPI_COMM_WORLD_RANK" in os.environ:
            # stay until mpirun stops this rank: its exit would make mpirun send to the lost host's daemon, and data
            # in flight turns TCP keepalive off, so mpirun would wait out TCP's retransmissions (~15 min) instead of
            # noticing the loss by keepalive (see Horovod.mpirun_args); if it does not (no host was lost, only a
            # rank's process stopped), exit after all
            logger.error("rank 0: waiting for mpirun to notice the lost host and stop the job")
            time.sleep(mpirun_notices_lost_host_within(settings.lost_rank_timeout))

    watches = RankWatches(settings, failures, report_missing=report_missing_rank, report_lost=report_lost_rank)
    code = 1  # this rank's exit, as its marker for the launcher says (see launcher_exit)
    try:
        rank, size = watches.start()
        result = body(**kwargs)
        rank = current_rank(settings, rank)
        hvd = settings.module()
        if hvd is not None and hasattr(hvd, "join"):
            hvd.join()  # rank 0 must not report success while another rank is still failing
        if hvd is not None and any(getattr(settings, name) for name in ARTIFACTS):
            hvd.shutdown()  # every rank is done with Horovod: rank 0's timeline is complete on disk
        code = 0
    except Exception as exc:
        watches.record_failure(rank, exc)
        error = failures.error(exc)
        if stopped or isinstance(error, StalledRanksError):
            # stopped: the launcher is ending the job, and Horovod's own shutdown at exit would wait on ranks that are
            # gone until the launcher's SIGKILL (5 s later). Stalled: a rank stuck in its own code never sees Horovod's
            # shutdown, and the entrypoint would exit 0 after writing the error. Either way: write the error and exit
            # non-zero at once, so that the launcher (mpirun, horovodrun) ends every rank without waiting
            world.write_error(error)
            flush_streams()
            os._exit(1)
        if rank != 0:  # the same report as rank 0's (all ranks write one error document): never a bare echo
            raise error from None
        try:
            _wait_for_other_failures(failures, timeout=5.0)
        except Exception as late:  # the launcher stopped this rank while it waited: report the failure all the same
            if not stopped:
                raise late
        raise failures.error(exc) from None
    finally:
        watches.stop()
        mark_this_rank_returned(failures.folder, settings, code)
        if in_main:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    return rank, result


def _wait_for_other_failures(failures: RankFailures, timeout: float) -> None:
    """Give the rank that failed first a moment to record its traceback (rank 0 often fails as its echo)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(failures.failures()) > 1:
            return
        time.sleep(0.2)
