"""The MPI route: a kfmpi-compatible ``MPIJob`` whose local runs start real Horovod ranks."""

import contextlib
import logging
import os
import signal
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Set

from flytekit import PythonFunctionTask
from flytekit.configuration import SerializationSettings
from flytekit.core.base_task import IgnoreOutputs
from flytekit.core.context_manager import FlyteContextManager
from flytekit.extend import TaskPlugins
from flytekitplugins.kfmpi import task as kfmpi

from .artifacts import SaysWhere, copy_to_raw_output, in_working_directory, say_where
from .constructs import refuse_dynamic
from .errors import LauncherStopped, RankLostError, StalledRanksError
from .executor import _shims
from .executor.failures import RankFailures, job_failures
from .executor.flyte_context import FlyteRankContext
from .executor.launcher_exit import mark_this_rank_returned
from .executor.mpirun_keepalive import mpirun_notices_lost_host_within
from .executor.noise import quiet_this_process
from .executor.processes import pdeathsig_setter
from .executor.rank_exit import flush_streams
from .executor.rank_start import current_rank, launched_rank, launched_size
from .executor.rank_watches import RankWatches
from .executor.settings import ARTIFACTS, Horovod, HorovodConfigError, whole_number
from .horovod_deck import add_horovod_deck
from .local_launcher import run_local

logger = logging.getLogger("flytekitplugins.horovod")

# The launcher's hostfile: the training-operator mounts it and sets this variable on the launcher pod; Kubernetes
# expands $(VAR) in container commands, so horovodrun reads the same hostfile mpirun reads by default (both get
# cluster_launcher's copy with the task's slots).
HOSTFILE_REF = "$(OMPI_MCA_orte_default_hostfile)"


# kfmpi's deprecated fields ([DEPRECATED] in flytekitplugins-kfmpi 1.16's docstrings) and what replaces each
DEPRECATED_FIELDS = {"num_workers": "worker=Worker(replicas={})", "num_launcher_replicas": "launcher=Launcher(replicas={})"}
_warned: Set[str] = set()  # the deprecated fields this process has warned about


def warn_deprecated_fields(config: Any) -> None:
    """A ``FutureWarning`` (shown to users by default) the first time this process sees each deprecated kfmpi field
    set; never in a rank (every rank imports the task's module again: the launching process has warned)."""
    if launched_rank() is not None:
        return
    for name, replacement in DEPRECATED_FIELDS.items():
        value = getattr(config, name)
        if value is not None and name not in _warned:
            _warned.add(name)
            warnings.warn(f"{type(config).__name__}({name}={value}) is deprecated, as in flytekitplugins-kfmpi: use "
                          f"{replacement.format(value)} (the same pods, serialized the same way)", FutureWarning,
                          stacklevel=5)  # the declaration: here, fill_job_defaults, __post_init__, the dataclass __init__


def fill_job_defaults(config: Any, counts: Dict[str, Any]) -> None:
    """Fill in and check what kfmpi's configs leave to the user: ``launcher.replicas`` is set to 1 where unset (kfmpi
    requires it set); ``HorovodConfigError`` unless the settings are a ``Horovod`` and every replica or slot count
    (and each of ``counts``) is None (unset) or a whole number >= 1. Deprecated kfmpi fields warn once."""
    warn_deprecated_fields(config)
    if config.launcher.replicas is None and config.num_launcher_replicas is None:
        config.launcher.replicas = 1
    if not isinstance(config.horovod, Horovod):
        raise HorovodConfigError(f"{type(config).__name__}.horovod must be a Horovod(...) settings object, got "
                                 f"{type(config.horovod).__name__}")
    for name, value in {"worker.replicas": config.worker.replicas, "num_workers": config.num_workers,
                        "launcher.replicas": config.launcher.replicas, "slots": config.slots, **counts}.items():
        if value is not None and not whole_number(value, at_least=1):
            raise HorovodConfigError(f"{name}={value!r}: must be a whole number, at least 1")


@dataclass
class MPIJob(kfmpi.MPIJob):
    """kfmpi's ``MPIJob`` (``launcher``, ``worker``, ``run_policy``, ``slots``) plus Horovod settings.

    Ranks: ``worker.replicas * slots``. A local run starts that many Horovod ranks on this host; on a cluster
    the Kubeflow training-operator's MPIJob launcher runs ``get_command()`` (``cluster_launcher`` around ``mpirun`` or
    ``horovodrun``) across the worker pods. ``launcher.replicas`` defaults to 1 (kfmpi requires it to be set).
    """

    horovod: Horovod = field(default_factory=Horovod)

    def __post_init__(self):
        fill_job_defaults(self, {})

    @property
    def num_ranks(self) -> int:
        """``worker.replicas * slots``: the one place the rank count of an MPIJob task comes from."""
        replicas = self.num_workers or self.worker.replicas
        if replicas is None:
            raise HorovodConfigError("MPIJob needs worker=Worker(replicas=N): the number of worker pods")
        return replicas * self.slots


class HorovodMPIFunctionTask(SaysWhere, kfmpi.MPIFunctionTask):
    """Runs the task body on every Horovod rank; the output is rank 0's return value.

    Serialization (task type ``mpi``, the kubeflow ``DistributedMPITrainingTask`` custom) is kfmpi's own.
    """

    def __init__(self, task_config: MPIJob, task_function: Callable, **kwargs):
        task_config.num_ranks  # validate before anything is registered
        super().__init__(task_config=task_config, task_function=task_function, **kwargs)
        refuse_dynamic(self)

    def get_command(self, settings: SerializationSettings) -> List[str]:
        """The launcher's command: ``cluster_launcher`` around ``mpirun`` (controller mpi) or ``horovodrun`` (gloo)
        around pyflyte-execute."""
        execute = ["python", settings.entrypoint_settings.path] + self._get_base_command(settings)
        command = launcher_command(self.task_config.num_ranks, self.task_config.horovod) + execute
        return cluster_command(self.task_config, command)

    def execute(self, **kwargs) -> Any:
        config = self.task_config
        if launched_rank() is not None:
            return execute_in_world(self, kwargs)
        quiet_this_process(config.horovod.verbose)  # this task's process, and the local tasks after it
        settings = in_working_directory(config.horovod)
        results = run_local(self._task_function, kwargs, num_proc=config.num_ranks, settings=settings,
                            flyte=FlyteRankContext.capture())
        return adopt(results[0], settings)


def execute_in_world(task: PythonFunctionTask, kwargs: Dict[str, Any]) -> Any:
    """Run the body once as one rank of a world a launcher already started (mpirun/horovodrun on a cluster).

    Rank 0 writes the outputs, the others raise ``IgnoreOutputs``. Every rank's pyflyte-execute writes a failure to
    the same ``error.pb``, last writer wins; so every rank reports the first rank that failed, with its host and
    traceback, read from a folder all ranks share, never its own echo of it ("Horovod has been shut down"). A rank
    that goes silent (host or link lost) is found by the heartbeat (``liveness``): rank 0 writes ``error.pb`` itself.
    """
    import flytekit

    if os.environ.get("HOROVOD_ELASTIC") == "1":
        # horovodrun starts a remote rank over ssh without a terminal: when the launcher stops it (a stall), sshd
        # sends the rank no SIGHUP, and a rank stuck in its own code would outlive the job; it ends with its sshd
        pdeathsig_setter(signal.SIGKILL)()
    settings = in_working_directory(task.task_config.horovod).for_body(task._task_function)
    settings.check_framework()  # a framework this image's Horovod lacks: the same error, first, on every rank
    rank, size = launched_rank(), launched_size()
    failures = job_failures(flytekit.current_context().raw_output_prefix)
    logger.info("rank %s of %s: running %s inside the launched world", rank, size, task.name)
    stopped: List[bool] = []

    def on_sigterm(signum, frame):
        # the launcher stops every rank when one failed or was lost: fail as a recoverable consequence, at once,
        # so that pyflyte-execute writes the error document before the launcher's SIGKILL follows
        stopped.append(True)
        raise LauncherStopped(f"rank {rank} was stopped by its launcher (SIGTERM): another rank failed or was lost")

    # signal handlers can only be set from the main thread (where pyflyte-execute runs the task)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if in_main else None
    ctx = FlyteContextManager.current_context()

    def report_missing_rank() -> None:  # from the join watch: this rank waits in hvd.init() for a rank that never came
        _shims.write_error_document(ctx, failures.error(RankLostError("a rank never reached hvd.init()")))

    def report_lost_rank() -> None:  # from the liveness thread: this rank's main thread is stuck in a collective
        _shims.write_error_document(ctx, failures.error(RankLostError("a rank was lost")))
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
        result = task._task_function(**kwargs)
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
            # shutdown, and pyflyte-execute would exit 0 after writing error.pb. Either way: write the error and exit
            # non-zero at once, so that the launcher (mpirun, horovodrun) ends every rank without waiting
            _shims.write_error_document(ctx, error)
            flush_streams()
            os._exit(1)
        if rank != 0:  # the same report as rank 0's (all ranks write one error.pb): never a bare echo
            raise error from None
        with contextlib.suppress(LauncherStopped):
            _wait_for_other_failures(failures, timeout=5.0)
        raise failures.error(exc) from None
    finally:
        watches.stop()
        mark_this_rank_returned(failures.folder, settings, code)
        if in_main:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
    if rank != 0:
        raise IgnoreOutputs(f"rank {rank}: only rank 0 writes the task's outputs")
    say_where_on_cluster(task, settings)
    return result


def say_where_on_cluster(task: PythonFunctionTask, settings: Horovod) -> None:
    """Rank 0 on a cluster: Horovod's files copied under the raw output prefix, and the task's ``where_line``."""
    import flytekit

    deck = f"{flytekit.current_context().output_metadata_prefix}/deck.html" if task.enable_deck else None
    say_where(task.name.split(".")[-1], copy_to_raw_output(settings), ["the launcher pod's log"], deck,
              autotune_log=settings.autotune_log_file)


def adopt(result, settings: Horovod) -> Any:
    """Rank 0's return value, with the decks it made and the "Horovod" Deck added to the running task's decks."""
    import flytekit

    decks = flytekit.current_context().decks
    for deck in result.decks:
        if deck not in decks:
            decks.append(deck)
    add_horovod_deck(settings)
    return result.value


def _wait_for_other_failures(failures: RankFailures, timeout: float) -> None:
    """Give the rank that failed first a moment to record its traceback (rank 0 often fails as its echo)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(failures.failures()) > 1:
            return
        time.sleep(0.2)


def launcher_command(num_ranks: int, settings: Horovod) -> List[str]:
    """The command prefix the MPI operator's launcher runs to start ``num_ranks`` ranks."""
    if settings.controller == "mpi":
        return (
            list(kfmpi.MPIFunctionTask._MPI_BASE_COMMAND)
            + ["--tag-output"]
            + settings.mpirun_args()
            + ["-np", str(num_ranks)]
        )
    return ["horovodrun", "-np", str(num_ranks), "--hostfile", HOSTFILE_REF] + settings.horovodrun_args()


def cluster_command(config: Any, command: List[str]) -> List[str]:
    """``command`` run by ``cluster_launcher`` with the task's slots; refused where the launcher would not run it."""
    if config.launcher.command and config.slots > 1:
        raise HorovodConfigError(
            f"slots={config.slots} with launcher=Launcher(command=...): flytepropeller (v1.16.8, mpi.go) runs that "
            "command instead of the task's and never passes slots to the MPIJob for task type version 1, so each "
            "worker has 1 slot in the operator's hostfile; leave Launcher.command unset (the task's launcher raises "
            "the hostfile to the task's slots) or use slots=1")
    from .cluster_launcher import prefix  # not at import: ``python -m`` runs that module after this package loads

    return prefix(config.slots) + command


TaskPlugins.register_pythontask_plugin(MPIJob, HorovodMPIFunctionTask)
