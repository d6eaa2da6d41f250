"""A PyTorch body ported from a kfmpi task as it stands (it calls ``hvd.init()`` of ``horovod.torch`` itself, and logs
its loss to TensorBoard as Horovod's TorchEstimator does in every rank), and one whose training loop is in a module
beside this file, both under the default settings."""

import os
import sys
import tempfile

from flytekit import task, workflow
from torch_loop import fit  # the module beside this file (pyflyte run puts its folder on sys.path)

from flytekitplugins.horovod import MPIJob, Worker


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def torch_body(steps: int) -> str:
    import horovod.torch as hvd
    import torch
    from torch.utils.tensorboard import SummaryWriter

    hvd.init()
    model = torch.nn.Linear(4, 1)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    logs = tempfile.mkdtemp()
    with SummaryWriter(logs) as writer:
        for step in range(steps):
            optimizer.zero_grad()
            loss = model(torch.randn(8, 4)).sum()
            loss.backward()
            optimizer.step()
            writer.add_scalar("loss", loss.item(), step)
    return f"size={hvd.size()} tensorflow_imported={'tensorflow' in sys.modules} event_files={len(os.listdir(logs))}"


@workflow
def wf(steps: int = 5) -> str:
    return torch_body(steps=steps)


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def loop_beside(steps: int) -> str:
    return f"loss={fit(steps):.3f} tensorflow_imported={'tensorflow' in sys.modules}"


@workflow
def loop_wf(steps: int = 5) -> str:
    return loop_beside(steps=steps)
