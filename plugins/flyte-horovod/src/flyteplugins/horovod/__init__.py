"""Horovod data-parallel training as Flyte 2 tasks: ``flyte.TaskEnvironment(plugin_config=MPIJob(...))``.

The configs have the names and fields of ``flytekitplugins.horovod``'s, so a v1 task ports by moving its config onto
a ``TaskEnvironment``. What runs the ranks is the runtime the v1 plugin uses (``flytekitplugins.horovod.executor``
and its local launcher), imported without flytekit: this package works where flytekit cannot be imported.
"""

from flytekitplugins.horovod.executor.settings import Horovod, HorovodConfigError

from .errors import RankFailedError, RankLostError, StalledRanksError
from .task import HorovodJob, HorovodMPITask, Launcher, MPIJob, RunPolicy, Worker

__all__ = [
    "Horovod",
    "HorovodConfigError",
    "HorovodJob",
    "HorovodMPITask",
    "Launcher",
    "MPIJob",
    "RankFailedError",
    "RankLostError",
    "RunPolicy",
    "StalledRanksError",
    "Worker",
]
