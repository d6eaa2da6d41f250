"""PyTorch bodies on the MPI route, loaded by path with ``pyflyte run``: ``Horovod(framework="pytorch")`` makes every
rank initialise ``horovod.torch`` before the body, under Gloo and under mpirun."""

import os
import signal
import typing

from flytekit import task, workflow

from flytekitplugins.horovod import Horovod, HorovodJob, MPIJob, Worker

Step = typing.NamedTuple("Step", [("total", float), ("size", int), ("weights_equal", bool), ("moved", bool),
                                   ("grouped_averages", bool)])


def _grouped_averages_as_per_tensor() -> bool:
    """``DistributedOptimizer(groups=1)`` (one flat buffer in the plugin's build: patch 0015), also with fp16
    compression, ends two steps with the gradients Horovod's per-tensor default averages, which are not this rank's
    own."""
    import horovod.torch as hvd
    import torch

    def gradients(prefix: str, distributed: bool = True, **kwargs):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Flatten(), torch.nn.Linear(6, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        if distributed:
            named = [(f"{prefix}.{name}", p) for name, p in model.named_parameters()]
            optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=named, **kwargs)
        for step in range(2):  # the second step: the group's count and handles were reset by the first
            optimizer.zero_grad()
            model(torch.tensor([[hvd.rank(), step + 2]])).pow(2).sum().mul(hvd.rank() + 1).backward()
            if distributed:
                optimizer.synchronize()
                with optimizer.skip_synchronize():
                    optimizer.step()
            else:
                optimizer.step()
        return [p.grad.clone() for p in model.parameters()]

    per_tensor, grouped = gradients("per_tensor"), gradients("grouped", groups=1)
    fp16 = gradients("grouped_fp16", groups=1, compression=hvd.Compression.fp16)
    own = gradients("own", distributed=False)
    return (all(torch.allclose(a, b) for a, b in zip(per_tensor, grouped))
            and all(torch.allclose(a, b, rtol=1e-2, atol=1e-3) for a, b in zip(per_tensor, fp16))
            and not all(torch.allclose(a, b) for a, b in zip(per_tensor, own)))


def _allreduce_and_one_step() -> Step:
    """The sum of the rank numbers; one DistributedOptimizer step from rank 0's broadcast weights, after which every
    rank holds the same weights (the gradients were averaged), different from where they started."""
    import horovod.torch as hvd
    import torch

    assert hvd.is_initialized()  # by the plugin, before the body
    total = float(hvd.allreduce(torch.tensor(float(hvd.rank())), op=hvd.Sum))
    print(f"rank {hvd.rank()} of {hvd.size()}: allreduce -> {total}", flush=True)
    torch.manual_seed(hvd.rank())  # different initial weights on every rank: the broadcast must make them equal
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    start = model.weight.detach().clone()
    x = torch.full((4, 3), float(hvd.rank() + 1))  # each rank its own data, so local gradients differ
    optimizer.zero_grad()
    model(x).pow(2).mean().backward()
    optimizer.step()
    weights = hvd.allgather(model.weight.detach())
    return Step(total, hvd.size(), bool(torch.allclose(weights[0], weights[1])),
                not torch.allclose(model.weight.detach(), start), _grouped_averages_as_per_tensor())


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(framework="pytorch")))
def torch_gloo() -> Step:
    return _allreduce_and_one_step()


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(framework="pytorch", controller="mpi")))
def torch_mpirun() -> Step:
    return _allreduce_and_one_step()


@workflow
def torch_gloo_wf() -> Step:
    return torch_gloo()


@workflow
def torch_mpirun_wf() -> Step:
    return torch_mpirun()


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(framework="pytorch")))
def torch_failing() -> float:
    import horovod.torch as hvd
    import torch

    if hvd.rank() == 1:
        raise ValueError("rank one has no data")
    return float(hvd.allreduce(torch.tensor(1.0)))


@workflow
def torch_failing_wf() -> float:
    return torch_failing()


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(framework="mxnet")))
def mxnet_body() -> int:
    return 1


@workflow
def mxnet_wf() -> int:
    return mxnet_body()


Trained = typing.NamedTuple("Trained", [("size", int), ("epochs", int), ("sizes_seen", typing.List[int]),
                                        ("loss", float)])


@task(task_config=HorovodJob(worker=Worker(replicas=3), min_workers=2, max_workers=3, elastic_timeout=120,
                             horovod=Horovod(framework="pytorch")))
def torch_elastic(epochs: int, kill_at_epoch: int) -> Trained:
    """Horovod's elastic PyTorch pattern: ``hvd.elastic.run`` with a ``TorchState`` committed every batch; with
    ``kill_at_epoch`` set, the worker that is rank 2 of 3 is SIGKILLed in the middle of that epoch."""
    import horovod.torch as hvd
    import torch

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 4, generator=generator)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 1.0
    model = torch.nn.Linear(4, 1)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                         named_parameters=model.named_parameters())
    sizes: typing.List[int] = []
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def fit(state) -> float:
        loss = torch.tensor(0.0)
        while state.epoch < epochs:
            sizes.append(hvd.size())
            shard_x, shard_y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()]
            batches = len(shard_x) // 64
            while state.batch < batches:
                if state.epoch == kill_at_epoch and state.batch == batches // 2 and hvd.size() == 3 \
                        and hvd.rank() == 2:
                    os.kill(os.getpid(), signal.SIGKILL)
                rows = slice(state.batch * 64, (state.batch + 1) * 64)
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(shard_x[rows]), shard_y[rows])
                loss.backward()
                optimizer.step()
                state.batch += 1
                state.commit()
            state.epoch, state.batch = state.epoch + 1, 0
            state.commit()
        return float(loss)

    loss = fit(state)
    return Trained(hvd.size(), state.epoch, sizes, loss)


@workflow
def torch_elastic_wf(epochs: int = 6, kill_at_epoch: int = -1) -> Trained:
    return torch_elastic(epochs=epochs, kill_at_epoch=kill_at_epoch)
