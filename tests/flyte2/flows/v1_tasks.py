"""A Flyte 1 file, unchanged, for ``pyflyte-migrate run``: a ``flytekitplugins.horovod`` ``MPIJob`` task under
``mpirun`` and a ``HorovodSpark`` task whose body runs the Run API, each allreducing ``x * (rank + 1)`` over 2 ranks
(docs/flyte2.md runs a kfmpi one)."""

from flytekit import task

from flytekitplugins.horovod import Horovod, HorovodSpark, MPIJob, Worker, spark_run


def _allreduce(x: float) -> str:
    import horovod.torch as hvd
    import torch

    total = hvd.allreduce(torch.tensor([x * (hvd.rank() + 1)]), op=hvd.Sum).item()
    return f"rank {hvd.rank()} of {hvd.size()}: {total}"


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi", framework="pytorch")))
def horovod_mpirun_allreduce(x: float) -> str:
    return _allreduce(x)


@task(task_config=HorovodSpark(num_proc=2, horovod=Horovod(framework="pytorch")))
def horovod_spark_allreduce(x: float) -> str:
    return spark_run(_allreduce, {"x": x})
