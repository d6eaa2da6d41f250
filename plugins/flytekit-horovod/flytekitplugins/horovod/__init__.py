"""Horovod data-parallel training as Flyte tasks, through Kubernetes MPI jobs and through Spark.

MPI route: ``@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(...)))``; elastic:
``HorovodJob(worker=Worker(replicas=3), min_workers=2)``.
Spark route: ``@task(task_config=HorovodSpark(num_proc=2, horovod=Horovod(...)))`` with ``spark_run``,
``spark_backend`` and ``spark_store`` in the body. Anywhere: ``HorovodRunner(np=2).run(main, **kwargs)``.

Importing this package registers the task plugins and changes nothing else (no environment variable, no logging
handler) but one thing: a Ctrl-C in any Spark task ends as ``InterruptedByUser`` (see ``interrupt``). What a task or
a rank needs is set when it starts.

What a rank or a Spark executor runs is the ``executor`` subpackage, which imports no flytekit; importing it runs this
file first, so without flytekit (a Spark executor, a bare rank image) this file registers nothing and exports nothing.
"""

try:
    import flytekit  # noqa: F401
except ImportError:  # only ``flytekitplugins.horovod.executor`` is usable here
    __all__ = []
else:
    from flytekitplugins.kfmpi import CleanPodPolicy, Launcher, RestartPolicy, RunPolicy, Worker

    from .disk_full import DiskFullError, names_a_full_disk
    from .elastic import HorovodElasticFunctionTask, HorovodJob
    from .errors import RankFailedError, RankLostError
    from .executor.settings import Horovod, HorovodConfigError, compression, current_settings
    from .mpi import HorovodMPIFunctionTask, MPIJob
    from .runner import HorovodRunner
    from .spark import (
        HorovodSpark,
        HorovodSparkContext,
        HorovodSparkFunctionTask,
        current_horovod_spark,
        spark_backend,
        spark_checkpoint_url,
        spark_run,
        spark_store,
    )
    from .spark_launcher import NotEnoughSlotsError
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
        "RunPolicy",
        "Worker",
        "compression",
        "current_horovod_spark",
        "current_settings",
        "names_a_full_disk",
        "spark_backend",
        "spark_checkpoint_url",
        "spark_run",
        "spark_store",
        "spark_torch_resume",
    ]
