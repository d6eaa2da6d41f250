"""A Flyte 1 file, unchanged, for ``pyflyte-migrate run``: a ``flytekitplugins.horovod`` ``MPIJob`` task under
``mpirun`` that allreduces ``x * (rank + 1)`` over 2 ranks (docs/flyte2.md runs a kfmpi one)."""

from flytekit import task

from flytekitplugins.horovod import Horovod, MPIJob, Worker


def _allreduce(x: float) -> str:
    import horovod.torch as hvd
    import torch

    total = hvd.allreduce(torch.tensor([x * (hvd.rank() + 1)]), op=hvd.Sum).item()
    return f"rank {hvd.rank()} of {hvd.size()}: {total}"


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi", framework="pytorch")))
def horovod_mpirun_allreduce(x: float) -> str:
    return _allreduce(x)
