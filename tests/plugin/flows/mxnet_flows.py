"""MXNet bodies on the MPI route, loaded by path with ``pyflyte run``: 2 ranks, an allreduce (value checked) and one
Gluon step with ``hvd.DistributedTrainer`` whose parameters must come out identical on both ranks, under Gloo and
mpirun. Needs Horovod built with MXNet (the mxnet leg of make matrix: mxnet 1.9.1, which needs numpy < 1.24)."""

from typing import NamedTuple

from flytekit import task, workflow

from flytekitplugins.horovod import Horovod, MPIJob, Worker

Result = NamedTuple("Result", [("rank", int), ("checksum", str)])


def mxnet_step() -> Result:
    """The body both tasks run; hvd.init() has already run in this rank (framework="mxnet")."""
    import hashlib

    import horovod.mxnet as hvd
    import mxnet as mx
    import numpy as np

    rank, size = hvd.rank(), hvd.size()
    assert hvd.is_initialized() and size == 2, (hvd.is_initialized(), size)

    summed = hvd.allreduce(mx.nd.ones((3,)) * (rank + 1), op=hvd.Sum, name="sum").asnumpy()
    assert np.allclose(summed, size * (size + 1) / 2), summed

    mx.random.seed(7 + rank)  # different initial weights on each rank: the broadcast must make them equal
    net = mx.gluon.nn.Dense(1, in_units=4)
    net.initialize(mx.init.Normal(1.0))
    params = net.collect_params()
    hvd.broadcast_parameters(params, root_rank=0)
    trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": 0.1})
    rng = np.random.default_rng(rank)  # this rank's own batch
    data, label = mx.nd.array(rng.normal(size=(8, 4))), mx.nd.array(rng.normal(size=(8, 1)))
    with mx.autograd.record():
        loss = mx.gluon.loss.L2Loss()(net(data), label)
    loss.backward()
    trainer.step(8)

    flat = np.concatenate([p.data().asnumpy().ravel() for p in params.values()]).astype(np.float32)
    checksum = hashlib.sha256(flat.tobytes()).hexdigest()[:16]
    everyone = hvd.allgather(mx.nd.array(flat).reshape((1, -1)), name="params").asnumpy()
    controller = "mpi" if hvd.mpi_enabled() else "gloo" if hvd.gloo_enabled() else "none"
    print(f"rank {rank}/{size} ({controller}): allreduce sum {summed[0]}; params sha {checksum}; "
          f"identical on all ranks: {bool((everyone == everyone[0]).all())}", flush=True)
    assert (everyone == everyone[0]).all(), everyone
    return Result(rank=rank, checksum=checksum)


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(framework="mxnet")))
def mxnet_gloo() -> Result:
    return mxnet_step()


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(framework="mxnet", controller="mpi")))
def mxnet_mpi() -> Result:
    return mxnet_step()


@workflow
def mxnet_gloo_wf() -> Result:
    return mxnet_gloo()


@workflow
def mxnet_mpi_wf() -> Result:
    return mxnet_mpi()
