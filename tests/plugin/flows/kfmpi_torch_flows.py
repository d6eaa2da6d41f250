"""A PyTorch body ported from a kfmpi task as it stands (it calls ``hvd.init()`` of ``horovod.torch`` itself), and one
whose training loop is in a module beside this file, both under the default settings."""

import sys

from flytekit import task, workflow
from torch_loop import fit  # the module beside this file (pyflyte run puts its folder on sys.path)

from flytekitplugins.horovod import MPIJob, Worker


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def torch_body(steps: int) -> str:
    import horovod.torch as hvd
    import torch

    hvd.init()
    model = torch.nn.Linear(4, 1)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.randn(8, 4)).sum().backward()
        optimizer.step()
    return f"size={hvd.size()} tensorflow_imported={'tensorflow' in sys.modules}"


@workflow
def wf(steps: int = 5) -> str:
    return torch_body(steps=steps)


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def loop_beside(steps: int) -> str:
    return f"loss={fit(steps):.3f} tensorflow_imported={'tensorflow' in sys.modules}"


@workflow
def loop_wf(steps: int = 5) -> str:
    return loop_beside(steps=steps)
