"""Horovod data-parallel training as Flyte tasks, through Kubernetes MPI jobs and through Spark.

MPI route: ``@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(...)))``; elastic:
``HorovodJob(worker=Worker(replicas=3), min_workers=2)``.
Spark route: ``@task(task_config=HorovodSpark(num_proc=2, horovod=Horovod(...)))`` with ``spark_run``,
``spark_backend`` and ``spark_store`` in the body. Anywhere: ``HorovodRunner(np=2).run(main, **kwargs)``.

Importing this package registers the task plugins and changes nothing else (no logging handler) but two things: a
Ctrl-C in any Spark task ends as ``InterruptedByUser`` (see ``interrupt``), and where tf-keras is installed,
``TF_USE_LEGACY_KERAS=1`` unless set (``tf.keras`` is then Keras 2, which Horovod's Keras API needs: see
``horovod_flyte_runtime``). What a task or a rank needs is set when it starts.

What a rank or a Spark executor runs is the runtime this plugin shares with the Flyte 2 plugin, ``horovod_flyte_runtime``
(its own distribution, which imports no flytekit); without flytekit this file registers nothing and exports nothing.
"""

import importlib.util as _util


def _importable(name: str) -> bool:
    try:
        return _util.find_spec(name) is not None
    except ImportError:  # a finder that refuses it
        return False


if not _importable("flytekit"):  # only ``horovod_flyte_runtime`` is usable here
    __all__ = []
elif not _importable("horovod"):  # only the build command is usable until Horovod is built
    import horovod_flyte_runtime  # noqa: F401  (TF_USE_LEGACY_KERAS, as when Horovod is there)

    __all__ = []

    def __getattr__(name: str):
        import importlib
        import sys

        if name.startswith("__"):
            raise AttributeError(name)
        if _importable(f"{__name__}.{name}"):  # a submodule (``from ... import image_spec``)
            return importlib.import_module(f"{__name__}.{name}")

        raise ImportError(f"flytekitplugins.horovod.{name}: Horovod is not installed in this Python environment "
                          f"({sys.executable}). Build it for the frameworks installed here with: "
                          f"{sys.executable} -m horovod_flyte_runtime.build")
else:
    from flytekitplugins.kfmpi import CleanPodPolicy, Launcher, RestartPolicy, RunPolicy, Worker

    from horovod_flyte_runtime.runner import HorovodRunner
    from horovod_flyte_runtime.running_settings import compression, current_settings
    from horovod_flyte_runtime.settings import Horovod, HorovodConfigError
    from horovod_flyte_runtime.spark_context import (
        HorovodSparkContext,
        current_horovod_spark,
        spark_backend,
        spark_checkpoint_url,
        spark_run,
        spark_store,
    )
    from horovod_flyte_runtime.spark_launcher import NotEnoughSlotsError

    from .disk_full import DiskFullError, names_a_full_disk
    from .elastic import HorovodElasticFunctionTask, HorovodJob
    from .errors import RankFailedError, RankLostError, StalledRanksError
    from .image_spec import horovod_image_spec
    from .mpi import HorovodMPIFunctionTask, MPIJob
    from .spark import HorovodSpark, HorovodSparkFunctionTask
    from .spark_torch import spark_torch_resume

    __all__ = [
        "CleanPodPolicy",
        "DiskFullError",
        "Horovod",
        "HorovodConfigError",
        "HorovodElasticFunctionTask",
        "HorovodJob",
        "HorovodMPIFunctionTask",
        "HorovodRunner",
        "HorovodSpark",
        "HorovodSparkContext",
        "HorovodSparkFunctionTask",
        "Launcher",
        "MPIJob",
        "NotEnoughSlotsError",
        "RankFailedError",
        "RankLostError",
        "RestartPolicy",
        "StalledRanksError",
        "RunPolicy",
        "Worker",
        "compression",
        "current_horovod_spark",
        "current_settings",
        "horovod_image_spec",
        "names_a_full_disk",
        "spark_backend",
        "spark_checkpoint_url",
        "spark_run",
        "spark_store",
        "spark_torch_resume",
    ]
