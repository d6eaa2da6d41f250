"""flyteplugins-horovod's hook in flytekit's implicit plugins (the ``flytekit.plugins`` entry point): where
flyte-migrate is loading (``pyflyte-migrate``, or ``import flyte_migrate`` before flytekit), it registers this
plugin's transformers for v1 ``MPIJob`` and ``HorovodJob`` configs (``flyteplugins.horovod.migrate``); anywhere
else it does nothing, and imports nothing, so a plain flytekit process pays nothing for it.

It runs while flyte-migrate itself is being imported (flyte-migrate imports flytekit, which loads its plugins), so the
transformers import the plugin when a task is made, not here.
"""

import sys
from typing import Any


def _mpi_job(v1_config: Any) -> Any:
    from flyteplugins.horovod.migrate import mpi_job

    return mpi_job(v1_config)


def _horovod_job(v1_config: Any) -> Any:
    from flyteplugins.horovod.migrate import horovod_job

    return horovod_job(v1_config)


def _horovod_spark(v1_config: Any) -> Any:
    from flyteplugins.horovod.migrate import horovod_spark

    return horovod_spark(v1_config)


if "flyte_migrate" in sys.modules:
    from flyte_migrate._plugins import register_plugin

    register_plugin("MPIJob", _mpi_job)  # kfmpi's and flytekitplugins.horovod's: the same class name
    register_plugin("HorovodJob", _horovod_job)
    register_plugin("HorovodSpark", _horovod_spark)
