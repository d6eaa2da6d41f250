"""Elastic Horovod: a kfmpi-compatible ``HorovodJob`` whose local runs are really elastic."""

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional

from flytekit.configuration import SerializationSettings
from flytekit.extend import TaskPlugins
from flytekitplugins.kfmpi import task as kfmpi

from horovod_flyte_runtime.artifacts import SaysWhere, in_working_directory
from horovod_flyte_runtime.cluster_command import cluster_command
from horovod_flyte_runtime.elastic_job import check_elastic_job
from horovod_flyte_runtime.flyte_context import FlyteRankContext
from horovod_flyte_runtime.local_launcher import run_local_elastic
from horovod_flyte_runtime.rank_start import launched_rank
from horovod_flyte_runtime.settings import Horovod

from .constructs import refuse_dynamic
from .mpi import adopt, execute_in_world, fill_job_defaults


@dataclass
class HorovodJob(kfmpi.HorovodJob):
    """kfmpi's ``HorovodJob`` (``worker``, ``launcher``, ``run_policy``, ``slots``, ``verbose``, ``log_level``,
    ``discovery_script_path``, ``elastic_timeout``) plus elastic bounds and Horovod settings.

    ``min_workers`` / ``max_workers``: how few worker hosts the job survives with and how many it grows to (default:
    ``worker.replicas``, i.e. kfmpi's fixed size). Ranks start at ``worker.replicas * slots``. The body uses
    ``hvd.elastic.run`` with a committed state (e.g. ``hvd.elastic.KerasState``), as in Horovod's elastic examples.
    On a cluster the training-operator's MPIJob launcher runs ``horovodrun`` with the operator's host discovery script
    (which lists exactly ``worker.replicas`` pods: a ``max_workers`` above it cannot grow the job there); a local run
    starts an elastic Gloo job on this host with a discovery script of its own.

    ``verbose`` and ``log_level`` have one source, ``horovod``; kfmpi's fields of those names are kept for kfmpi's
    users: ``horovod.log_level`` is kfmpi's ``log_level`` (``"INFO"`` by default, as kfmpi's command passes it) where
    ``horovod`` leaves it unset, ``horovod.verbose`` is true where either is, and both fields then hold the settings'
    values. Every run (local, or ``horovodrun`` on a cluster) passes each once.
    """

    min_workers: Optional[int] = None
    max_workers: Optional[int] = None
    horovod: Horovod = field(default_factory=Horovod)

    def __post_init__(self):
        fill_job_defaults(self, {"min_workers": self.min_workers, "max_workers": self.max_workers,
                                 "elastic_timeout": self.elastic_timeout})
        self.horovod = self.horovod.with_kfmpi_logging(self.verbose, self.log_level)
        self.verbose, self.log_level = self.horovod.verbose, self.horovod.log_level
        check_elastic_job(self.horovod, self.workers, self.min_workers, self.max_workers)

    @property
    def workers(self) -> Optional[int]:
        return self.num_workers or self.worker.replicas

    @property
    def min_worker_count(self) -> int:
        return check_elastic_job(self.horovod, self.workers, self.min_workers, self.max_workers)[0]

    @property
    def max_worker_count(self) -> int:
        return check_elastic_job(self.horovod, self.workers, self.min_workers, self.max_workers)[1]


class HorovodElasticFunctionTask(SaysWhere, kfmpi.HorovodFunctionTask):
    """Runs the body on every rank of an elastic Horovod job; the output is the final rank 0's return value.

    Serialization is kfmpi's ``HorovodJob`` (task type ``mpi``); the command is ``cluster_launcher`` around kfmpi's
    ``horovodrun`` with the elastic bounds from ``min_workers``/``max_workers`` and the ``Horovod`` settings' flags.
    """

    def __init__(self, task_config: HorovodJob, task_function: Callable, **kwargs):
        super().__init__(task_config=task_config, task_function=task_function, **kwargs)
        refuse_dynamic(self)

    def get_command(self, settings: SerializationSettings) -> List[str]:
        return cluster_command(self.task_config, super().get_command(settings))

    def _get_horovod_prefix(self) -> List[str]:
        config = self.task_config
        prefix = super()._get_horovod_prefix() if config.worker.replicas else self._prefix_for_num_workers()
        prefix[prefix.index("--min-np") + 1] = str(config.min_worker_count * config.slots)
        prefix[prefix.index("--max-np") + 1] = str(config.max_worker_count * config.slots)
        # kfmpi's prefix passes --log-level and --verbose from the job's fields, which hold the settings' values
        return prefix + dataclasses.replace(config.horovod, log_level=None, verbose=False).horovodrun_args()

    def _prefix_for_num_workers(self) -> List[str]:
        """kfmpi's prefix when only the deprecated ``num_workers`` is set (kfmpi's own crashes on it)."""
        config = self.task_config
        config.worker.replicas = config.num_workers
        try:
            return super()._get_horovod_prefix()
        finally:
            config.worker.replicas = None

    def execute(self, **kwargs) -> Any:
        config = self.task_config
        if launched_rank() is not None:
            return execute_in_world(self, kwargs)
        settings = in_working_directory(config.horovod)
        result = run_local_elastic(self._task_function, kwargs, workers=config.workers,
                                   min_workers=config.min_worker_count, max_workers=config.max_worker_count,
                                   slots=config.slots, settings=settings, flyte=FlyteRankContext.capture(),
                                   elastic_timeout=config.elastic_timeout)
        return adopt(result, settings)


TaskPlugins.register_pythontask_plugin(HorovodJob, HorovodElasticFunctionTask)
