"""The MPI route: a kfmpi-compatible ``MPIJob`` whose local runs start real Horovod ranks."""

import logging
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Set

from flytekit import PythonFunctionTask
from flytekit.configuration import SerializationSettings
from flytekit.core.base_task import IgnoreOutputs
from flytekit.core.context_manager import FlyteContextManager
from flytekit.extend import TaskPlugins
from flytekitplugins.kfmpi import task as kfmpi

from horovod_flyte_runtime import _shims
from horovod_flyte_runtime.artifacts import SaysWhere, copy_to_raw_output, in_working_directory, say_where
from horovod_flyte_runtime.cluster_command import cluster_command, launcher_command
from horovod_flyte_runtime.failures import job_failures
from horovod_flyte_runtime.flyte_context import FlyteRankContext
from horovod_flyte_runtime.local_launcher import run_local
from horovod_flyte_runtime.noise import quiet_this_process
from horovod_flyte_runtime.rank_start import launched_rank
from horovod_flyte_runtime.settings import Horovod, HorovodConfigError, whole_number
from horovod_flyte_runtime.world_rank import WorldRank, run_in_world

from .constructs import refuse_dynamic
from .errors import LauncherStopped
from .horovod_deck import add_horovod_deck

logger = logging.getLogger("flytekitplugins.horovod")


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
    """Run the body once as one rank of a world a launcher already started (mpirun/horovodrun on a cluster): the
    runtime's ``run_in_world`` in pyflyte-execute. Rank 0 writes the outputs, the others raise ``IgnoreOutputs``;
    every rank's pyflyte-execute writes a failure to the same ``error.pb`` (last writer wins), each the job's first
    failure, and rank 0 writes it itself for a lost rank."""
    import flytekit

    ctx = FlyteContextManager.current_context()
    world = WorldRank(task.name, job_failures(flytekit.current_context().raw_output_prefix),
                      write_error=lambda error: _shims.write_error_document(ctx, error), stopped=LauncherStopped)
    settings = in_working_directory(task.task_config.horovod).for_body(task._task_function)
    rank, result = run_in_world(world, task._task_function, kwargs, settings)
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


TaskPlugins.register_pythontask_plugin(MPIJob, HorovodMPIFunctionTask)
