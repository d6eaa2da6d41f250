"""Ranks out of step as a user meets them with ``pyflyte run``: the issue's 2-rank PyTorch ``MPIJob`` whose rank 1 has
three more batches, and an elastic ``HorovodJob`` whose rank 1 sleeps outside any collective (Horovod's elastic loop
would take the stall check's shutdown for a reset and run the step again). ``stall_timeout=15`` on both."""

from flytekit import task

from flytekitplugins.horovod import Horovod, HorovodJob, MPIJob, Worker
from tests.support.stalled_rank import uneven_torch

SETTINGS = Horovod(framework="pytorch", stall_timeout=15)


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=SETTINGS))
def uneven_batches() -> int:
    return uneven_torch()


@task(task_config=HorovodJob(worker=Worker(replicas=2), min_workers=1, max_workers=2, elastic_timeout=30,
                             horovod=SETTINGS))
def elastic_out_of_step() -> int:
    import time

    import horovod.torch as hvd
    import torch

    @hvd.elastic.run
    def train(state) -> int:
        hvd.allreduce(torch.tensor(1.0), name="warm_up")
        if hvd.rank() == 1:
            time.sleep(600)  # a data loader that never yields
        hvd.allreduce(torch.tensor(1.0), name="epoch_metric")
        return hvd.size()

    return train(hvd.elastic.TorchState(step=0))
