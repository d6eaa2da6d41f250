"""The MPI route on Flyte 2: ``MPIJob`` (the v1 plugin's config, fields and names) and the task class that runs it.

A local run (``flyte run --local``, ``flyte.init(); flyte.run(...)``) starts ``worker.replicas * slots`` real Horovod
ranks on this host through the runtime's local launcher, the one the v1 plugin's local runs use (Gloo, or ``mpirun``
with ``Horovod(controller="mpi")``), and returns rank 0's result; a rank's failure is the runtime's named error (not
retried where a retry would fail the same way: ``errors``). On a cluster the task is an MPIJob the Flyte 2 backend's
``mpi`` plugin builds: the launcher pod runs ``container_args`` (the runtime's ``cluster_launcher`` around ``mpirun`` or
``horovodrun`` around ``a0``), each rank runs the body once (``_in_world``) and rank 0's outputs are the task's.
Nothing here imports flytekit.
"""

import asyncio
import functools
import inspect
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Literal, Optional

from flyte import Resources
from flyte._context import internal_ctx
from flyte._task import P, R
from flyte.extend import AsyncFunctionTaskTemplate, TaskPluginRegistry
from flyte.models import SerializationContext

from horovod_flyte_runtime.cluster_command import cluster_command, launcher_command
from horovod_flyte_runtime.elastic_job import check_elastic_job
from horovod_flyte_runtime.errors import RankFailedError as RankFailed
from horovod_flyte_runtime.errors import RankLostError
from horovod_flyte_runtime.failures import job_failures
from horovod_flyte_runtime.flyte2_error import write_flyte2_error
from horovod_flyte_runtime.local_launcher import run_local, run_local_elastic
from horovod_flyte_runtime.rank_start import launched_rank
from horovod_flyte_runtime.settings import Horovod, HorovodConfigError, whole_number
from horovod_flyte_runtime.world_rank import WorldRank, run_in_world

from .errors import as_flyte_error
from .progress import ReportProgress
from .rank_context import Flyte2RankContext

RestartPolicy = Literal["always", "failure", "never"]  # kfmpi's RestartPolicy members, lower-cased
_RESTART = {"always": "RESTART_POLICY_ALWAYS", "failure": "RESTART_POLICY_ON_FAILURE", "never": "RESTART_POLICY_NEVER"}


@dataclass
class RunPolicy:
    """kfmpi's ``RunPolicy``: what the MPI operator does with the job's pods (unused by local runs)."""

    clean_pod_policy: Optional[Literal["none", "running", "all"]] = None
    ttl_seconds_after_finished: Optional[int] = None
    active_deadline_seconds: Optional[int] = None
    backoff_limit: Optional[int] = None


@dataclass
class _Pods:
    """What kfmpi's ``Worker`` and ``Launcher`` both say of their pods."""

    command: Optional[List[str]] = None
    image: Optional[str] = None
    requests: Optional[Resources] = None
    limits: Optional[Resources] = None
    replicas: Optional[int] = None
    restart_policy: Optional[RestartPolicy] = None


@dataclass
class Worker(_Pods):
    """kfmpi's ``Worker``: the worker pods; ``replicas`` of them, each running ``MPIJob.slots`` ranks."""


@dataclass
class Launcher(_Pods):
    """kfmpi's ``Launcher``: the pod that runs ``mpirun`` or ``horovodrun`` (``replicas`` defaults to 1)."""


@dataclass
class MPIJob:
    """``flytekitplugins.horovod.MPIJob`` for a ``flyte.TaskEnvironment``: kfmpi's ``launcher``, ``worker``,
    ``run_policy`` and ``slots``, plus the ``horovod`` settings (the runtime's own ``Horovod``).

    Ranks: ``worker.replicas * slots``. Checked when made: ``HorovodConfigError`` for a count that is not a whole
    number >= 1 or settings that are not a ``Horovod``."""

    launcher: Launcher = field(default_factory=Launcher)
    worker: Worker = field(default_factory=Worker)
    run_policy: Optional[RunPolicy] = None
    slots: int = 1
    horovod: Horovod = field(default_factory=Horovod)

    def __post_init__(self):
        if self.launcher.replicas is None:
            self.launcher.replicas = 1
        if not isinstance(self.horovod, Horovod):
            raise HorovodConfigError(f"{type(self).__name__}.horovod must be a Horovod(...) settings object, got "
                                     f"{type(self.horovod).__name__}")
        for name, value in {"worker.replicas": self.worker.replicas, "launcher.replicas": self.launcher.replicas,
                            "slots": self.slots}.items():
            if value is not None and not whole_number(value, at_least=1):
                raise HorovodConfigError(f"{name}={value!r}: must be a whole number, at least 1")

    @property
    def num_ranks(self) -> int:
        """``worker.replicas * slots``, as in the v1 plugin."""
        if self.worker.replicas is None:
            raise HorovodConfigError("MPIJob needs worker=Worker(replicas=N): the number of worker pods")
        return self.worker.replicas * self.slots


@dataclass
class HorovodJob(MPIJob):
    """``flytekitplugins.horovod.HorovodJob`` for a ``flyte.TaskEnvironment``: an ``MPIJob`` whose local run is an
    elastic Horovod job on Gloo (``horovodrun`` with a host discovery script of its own, the v1 plugin's launcher).

    ``min_workers`` / ``max_workers``: how few worker hosts the job survives with and how many it grows to (unset:
    ``worker.replicas``, a fixed size, filled in when made); ``elastic_timeout``: how long ``horovodrun`` waits for enough workers, in
    seconds. The body uses ``hvd.elastic.run`` with a committed state, as in Horovod's elastic examples; the output is
    the return value of the rank that is rank 0 at the end."""

    min_workers: Optional[int] = None
    max_workers: Optional[int] = None
    elastic_timeout: int = 1200

    def __post_init__(self):
        super().__post_init__()
        for name in ("min_workers", "max_workers", "elastic_timeout"):
            value = getattr(self, name)
            if value is not None and not whole_number(value, at_least=1):
                raise HorovodConfigError(f"{name}={value!r}: must be a whole number, at least 1")
        self.min_workers, self.max_workers = check_elastic_job(self.horovod, self.worker.replicas, self.min_workers,
                                                               self.max_workers)


def in_a_rank(func: Callable) -> Callable:
    """``func`` as a rank calls it: a coroutine function run to its end in the rank's own event loop. The wrapper
    keeps ``__wrapped__``, so ``Horovod(framework="auto")`` still reads the framework from the body's code."""
    if not inspect.iscoroutinefunction(func):
        return func

    @functools.wraps(func)
    def run(**kwargs: Any) -> Any:
        return asyncio.run(func(**kwargs))

    return run


def as_kwargs(func: Callable, args: tuple, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The call's arguments all by name (the ranks get keyword arguments only)."""
    if not args:
        return dict(kwargs)
    return dict(inspect.signature(func).bind(*args, **kwargs).arguments)


@dataclass(kw_only=True)
class HorovodMPITask(AsyncFunctionTaskTemplate):
    """A Flyte 2 task whose environment's ``plugin_config`` is an ``MPIJob`` or a ``HorovodJob`` (elastic): the body is
    the per-rank function, the output rank 0's return value."""

    task_type: str = "mpi"
    task_type_version: int = 1
    plugin_config: MPIJob

    def __post_init__(self):
        super().__post_init__()
        self.plugin_config.num_ranks  # refuse a config with no worker count when the task is declared

    async def execute(self, *args: P.args, **kwargs: P.kwargs) -> R:
        from flyte._utils.asyncify import run_sync_in_thread

        if launched_rank() is not None:  # one rank of the world the cluster launcher started: the body, once
            return await run_sync_in_thread(self._in_world, as_kwargs(self.func, args, kwargs))
        config = self.plugin_config
        body, arguments = in_a_rank(self.func), as_kwargs(self.func, args, kwargs)
        progress = ReportProgress() if self.report else None  # rank 0's lines in the report as they come
        on_line = progress.add if progress is not None else None
        rank_context = Flyte2RankContext.capture()  # flyte.ctx() in the ranks: the checkpoint, the raw data path
        if isinstance(config, HorovodJob):
            launch = run_sync_in_thread(
                run_local_elastic, body, arguments, workers=config.worker.replicas, min_workers=config.min_workers,
                max_workers=config.max_workers, slots=config.slots, settings=config.horovod,
                elastic_timeout=config.elastic_timeout, on_rank0_line=on_line, flyte=rank_context)
        else:
            launch = run_sync_in_thread(run_local, body, arguments, num_proc=config.num_ranks,
                                        settings=config.horovod, says_where=True, on_rank0_line=on_line,
                                        flyte=rank_context)
        launch = asyncio.ensure_future(launch)
        try:
            if progress is not None:
                await progress.follow(launch)
            result = await launch
        except RankFailed as exc:  # the same on every attempt: Flyte 2 must not retry it
            raise as_flyte_error(exc) from None
        if not isinstance(config, HorovodJob):
            result = result[0]
        return result.value

    def _in_world(self, kwargs: Dict[str, Any]) -> Any:
        """This rank's run of the body, watched, in the job's failure record under the raw data path; its errors
        are the plugin's. Every rank returns its result; ``a0`` uploads rank 0's only (``cluster_rank``)."""
        tctx = internal_ctx().data.task_context
        world = WorldRank(self.name, job_failures(tctx.raw_data_path.path),
                          write_error=functools.partial(write_flyte2_error, tctx.output_path),
                          stopped=RankLostError)
        settings = self.plugin_config.horovod.files_in(os.getcwd()).for_body(self.func)
        try:
            return run_in_world(world, in_a_rank(self.func), kwargs, settings)[1]
        except RankFailed as exc:
            raise as_flyte_error(exc) from None

    def container_args(self, sctx: SerializationContext) -> List[str]:
        """The MPI operator's launcher command: the runtime's ``cluster_launcher`` (the task's slots restored, the
        task's error written where the backend reads it) around ``mpirun`` or ``horovodrun`` (the task's controller),
        around each rank's ``cluster_rank`` and Flyte 2's ``a0`` for this task (tests/flyte2/test_cluster.py)."""
        config = self.plugin_config
        if isinstance(config, HorovodJob):
            raise NotImplementedError("HorovodJob (elastic) is not serialized for a Flyte 2 cluster yet: run it "
                                      "locally, or use MPIJob (a fixed number of ranks) on a cluster")
        rank = ["python", "-m", f"{__package__}.cluster_rank", *super().container_args(sctx)]
        return cluster_command(config, launcher_command(config.num_ranks, config.horovod) + rank)

    def custom_config(self, sctx: SerializationContext) -> Optional[Dict[str, Any]]:
        """The template's ``custom``: flyteidl2's kubeflow ``DistributedMPITrainingTask`` as JSON (task type ``mpi``,
        version 1), the fields flyteorg/flyte's ``kfoperators/mpi/mpi.go`` reads for version 1 (tests/flyte2)."""
        from flyteidl2.plugins.kubeflow import common_pb2, mpi_pb2
        from google.protobuf.json_format import MessageToDict

        config = self.plugin_config
        policy = None
        if config.run_policy is not None:
            run = config.run_policy
            policy = common_pb2.RunPolicy(
                clean_pod_policy=f"CLEANPOD_POLICY_{run.clean_pod_policy.upper()}" if run.clean_pod_policy else None,
                ttl_seconds_after_finished=run.ttl_seconds_after_finished,
                active_deadline_seconds=run.active_deadline_seconds, backoff_limit=run.backoff_limit)
        job = mpi_pb2.DistributedMPITrainingTask(worker_replicas=_replica_spec(config.worker),
                                                 launcher_replicas=_replica_spec(config.launcher),
                                                 run_policy=policy, slots=config.slots)
        return MessageToDict(job)


def _replica_spec(replicas: Any) -> Any:
    """flyteidl2's ``DistributedMPITrainingReplicaSpec`` of a ``Worker`` or ``Launcher``."""
    from flyteidl2.plugins.kubeflow import mpi_pb2

    if replicas.requests is not None or replicas.limits is not None:
        raise NotImplementedError(f"{type(replicas).__name__}(requests=..., limits=...) is not serialized yet: set "
                                  f"the TaskEnvironment's resources")
    return mpi_pb2.DistributedMPITrainingReplicaSpec(
        replicas=replicas.replicas, image=replicas.image, command=replicas.command or [],
        restart_policy=_RESTART[replicas.restart_policy] if replicas.restart_policy else None)


TaskPluginRegistry.register(config_type=MPIJob, plugin=HorovodMPITask)
TaskPluginRegistry.register(config_type=HorovodJob, plugin=HorovodMPITask)
