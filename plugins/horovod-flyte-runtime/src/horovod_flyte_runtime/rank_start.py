"""How a process becomes one Horovod rank: its rank and world size from its launcher, its settings in its
environment, ``hvd.init()`` of the chosen framework and rank-prefixed logs.

No flytekit import: rank processes started by Spark tasks use this module.
"""

import gc
import logging
import os
import sys
from typing import Optional, Sequence, Tuple

from .elastic_rendezvous import sign_worker_addresses
from .failures import this_host
from .loopback import bind_horovod_to_loopback
from .noise import quiet_this_process
from .settings import SETTINGS_ENV, Horovod

logger = logging.getLogger("flytekitplugins.horovod")

# Set by mpirun (OpenMPI), horovodrun / horovod.runner (HOROVOD_RANK) and MPICH / Intel MPI (PMI_RANK).
RANK_ENV_VARS = ("OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "PMI_RANK")
SIZE_ENV_VARS = ("OMPI_COMM_WORLD_SIZE", "HOROVOD_SIZE", "PMI_SIZE")
LOCAL_SIZE_ENV_VARS = ("OMPI_COMM_WORLD_LOCAL_SIZE", "HOROVOD_LOCAL_SIZE", "MPI_LOCALNRANKS")
# The compute threads of OpenMP (oneDNN, torch's intra-op pool) and TensorFlow's two pools, read at import
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
# Allocations between two collections of Python's youngest generation in a rank (Python's default: 700); see
# collect_garbage_less_often
RANK_GC_THRESHOLD = 20_000


def _from_env(names: Sequence[str]) -> Optional[int]:
    for name in names:
        if os.environ.get(name, "") != "":
            return int(os.environ[name])
    return None


def launched_rank() -> Optional[int]:
    """This process's rank when it runs inside an already launched world (mpirun, horovodrun), else None."""
    return _from_env(RANK_ENV_VARS)


def launched_size() -> Optional[int]:
    """The world size set by the launcher of this process, else None."""
    return _from_env(SIZE_ENV_VARS)


def share_cores_between_local_ranks() -> None:
    """Give each compute-thread setting this rank has not got (``THREAD_ENV_VARS``) its share of the host's cores:
    the cores this process may run on, divided by the ranks on this host. The frameworks' defaults take every core
    in every rank, so N ranks on a host ran N times as many compute threads as cores. Never more threads than the
    defaults; where the launcher gives no local size, nothing changes."""
    local_size = _from_env(LOCAL_SIZE_ENV_VARS)
    if not local_size or local_size < 2:
        return
    threads = str(max(1, len(os.sched_getaffinity(0)) // local_size))
    for name in THREAD_ENV_VARS:
        os.environ.setdefault(name, threads)


def collect_garbage_less_often() -> None:
    """Collect Python's youngest generation every ``RANK_GC_THRESHOLD`` allocations instead of every 700. A rank
    first imports its framework (TensorFlow with Horovod and flytekit: about 370,000 objects that live as long as the
    process), which Python's default thresholds re-scanned in 1,193 collections over a Keras rank's start and 2-epoch
    fit, against 74 at this threshold: the imports took 10% less CPU, the heap 1% more (docs/performance.md, section
    16). A threshold this process already raised is kept, and one the user sets in the task's body replaces this."""
    first, *older = gc.get_threshold()
    if gc.isenabled() and first < RANK_GC_THRESHOLD:
        gc.set_threshold(RANK_GC_THRESHOLD, *older)


def configure_rank_logging(rank: int, size: int) -> None:
    """In a rank's own process: prefix its log lines with its rank, so interleaved output stays readable."""
    fmt = f"[rank {rank}/{size}] %(asctime)s %(levelname)s %(name)s: %(message)s"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt, "%H:%M:%S"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    # TensorFlow gives its logger a handler of its own when imported before this (hvd.init() of horovod.tensorflow):
    # its lines would print twice, raw and rank-prefixed
    logging.getLogger("tensorflow").handlers = []


def start_rank(settings: Horovod) -> Tuple[int, int]:
    """Prepare this process as one Horovod rank: the settings in its environment, the known noise filtered (``noise``),
    each framework's compute threads a share of the host's cores, fewer garbage collections, ``hvd.init()`` of the
    chosen framework, rank-prefixed logs. Horovod's services bind loopback in a local run, an elastic rank signs its
    address for the rendezvous. Returns (rank, size)."""
    os.environ[SETTINGS_ENV] = settings.to_json()
    os.environ.update(settings.env())
    collect_garbage_less_often()  # both before hvd.init() imports the framework
    share_cores_between_local_ranks()
    quiet_this_process(settings.verbose)
    bind_horovod_to_loopback()
    if os.environ.get("HOROVOD_ELASTIC") == "1":
        sign_worker_addresses()
    rank, size = launched_rank() or 0, launched_size() or 1
    hvd = settings.init_horovod()
    if hvd is not None:
        rank, size = hvd.rank(), hvd.size()
    configure_rank_logging(rank, size)
    if rank == 0:
        logger.info("Horovod world of %d ranks, controller %s, framework %s, settings %s", size,
                    settings.controller, settings.framework, settings.env())
    else:  # a line in the log of every rank (rank 0's alone reach the console)
        logger.info("rank %d of %d started on %s, process %d", rank, size, this_host(), os.getpid())
    return rank, size


def current_rank(settings: Horovod, fallback: int) -> int:
    """This process's rank now: elastic jobs renumber their ranks when workers leave or join."""
    hvd = settings.module()
    return hvd.rank() if hvd is not None and hvd.is_initialized() else fallback
