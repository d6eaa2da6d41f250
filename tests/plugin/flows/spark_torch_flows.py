"""PyTorch through the Spark route: spark_run and HorovodRunner ranks with horovod.torch, and TorchEstimator with a
Flyte checkpoint that a retry resumes from."""

import json
import os
import signal
import typing

import flytekit
import torch
from flytekit import task, workflow

from flytekitplugins.horovod import (
    Horovod,
    HorovodRunner,
    HorovodSpark,
    spark_backend,
    spark_checkpoint_url,
    spark_run,
    spark_torch_resume,
)

TORCH = Horovod(framework="pytorch")
LR = 0.05
STEPS = 8  # per epoch, so that a rank can count its way to a given epoch


def _ranks_train() -> typing.Dict[str, typing.Any]:
    """A rank: allreduce of rank numbers, then two DistributedOptimizer steps from rank-dependent initial weights and
    rank-dependent data; returns what the test compares across ranks."""
    import horovod.torch as hvd  # hvd.init() has already run: Horovod(framework="pytorch")

    total = hvd.allreduce(torch.tensor(float(hvd.rank())), op=hvd.Sum).item()
    torch.manual_seed(hvd.rank())  # different initial weights on every rank: broadcast_parameters makes them rank 0's
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    initial = [p.detach().flatten().tolist() for p in model.parameters()]
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    x = torch.full((4, 2), float(hvd.rank() + 1))  # each rank its own data: only averaged gradients keep ranks equal
    for _ in range(2):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), torch.zeros(4, 1)).backward()
        optimizer.step()
    return {"rank": hvd.rank(), "size": hvd.size(), "sum": total, "initial": initial,
            "trained": [p.detach().flatten().tolist() for p in model.parameters()]}


@task(task_config=HorovodSpark(num_proc=2, horovod=TORCH))
def torch_ranks() -> str:
    """The same ranks by spark_run (every rank's result) and HorovodRunner (rank 0's), on Spark and locally."""
    return json.dumps({"spark_run": spark_run(_ranks_train, all_ranks=True),
                       "runner_spark": HorovodRunner(np=2).run(_ranks_train),
                       "runner_local": HorovodRunner(np=-2).run(_ranks_train)})


@workflow
def torch_ranks_wf() -> str:
    return torch_ranks()


def _rank_one_raises() -> float:
    import horovod.torch as hvd

    if hvd.rank() == 1:
        raise KeyError("torch rank one lost its key")
    return hvd.allreduce(torch.tensor(1.0)).item()


@task(task_config=HorovodSpark(num_proc=2, horovod=TORCH))
def torch_fails() -> float:
    return spark_run(_rank_one_raises)


@workflow
def torch_failing_wf() -> float:
    return torch_fails()


class Linear(torch.nn.Module):
    """y from two features in one array column; defined here, so the Estimator's ranks import this module to unpickle
    it."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def _minibatch_that_kills_rank_1_at(call: int):
    """Horovod's own minibatch step, except that rank 1 SIGKILLs itself (a lost rank) at that call (0: never)."""
    from horovod.spark.torch.remote import _train_minibatch_fn

    train, calls = _train_minibatch_fn(), [0]

    def minibatch(*args):
        import horovod.torch as hvd

        calls[0] += 1
        if hvd.rank() == 1 and calls[0] == call:
            os.kill(os.getpid(), signal.SIGKILL)
        return train(*args)

    return minibatch


@task(task_config=HorovodSpark(num_proc=2, spark_conf={"spark.sql.shuffle.partitions": "4"}, horovod=TORCH))
def torch_estimator(epochs: int, kill_rank_1_at_step: int) -> str:
    """TorchEstimator fit + transform with the Estimator's default data module, from an array column with sample
    weights (all 1: the losses stay comparable), resumable; what the tests check, as JSON."""
    from horovod.spark.torch import TorchEstimator
    from pyspark.sql import functions as F

    spark = flytekit.current_context().spark_session
    rows = [(float(i % 7), float(i % 5), 2.0 * (i % 7) - (i % 5) + 1.0, 1.0) for i in range(400)]
    df = spark.createDataFrame(rows, ["x1", "x2", "y", "w"]).repartition(4).withColumn("x", F.array("x1", "x2"))
    torch.manual_seed(0)
    model = Linear()
    x, y = torch.tensor([r[:2] for r in rows]), torch.tensor([[r[2]] for r in rows])
    untrained = torch.nn.functional.mse_loss(model(x), y).item()
    resume = spark_torch_resume(epochs)
    print(f"resuming after epoch {resume.epochs_done} of {epochs}", flush=True)
    estimator = TorchEstimator(
        backend=spark_backend(), store=resume.store, run_id=resume.run_id, epochs=resume.epochs_left,
        model=model, optimizer=torch.optim.Adam(model.parameters(), lr=LR), loss=torch.nn.functional.mse_loss,
        input_shapes=[[-1, 2]], feature_cols=["x"], label_cols=["y"], sample_weight_col="w", batch_size=16,
        train_steps_per_epoch=STEPS, validation=0.2, random_seed=1,
        train_minibatch_fn=_minibatch_that_kills_rank_1_at(kill_rank_1_at_step), verbose=0)
    fitted = estimator.fit(df)
    predicted = fitted.transform(df).toPandas()
    published = os.path.join(spark_checkpoint_url(), "torch-estimator")
    return json.dumps({
        "data_module": estimator.getDataModule().__name__,
        "epochs_done": resume.epochs_done,
        "train_loss": [epoch["train"]["loss"] for epoch in fitted.getHistory()],
        "lr": fitted.getOptimizer().param_groups[0]["lr"],
        "untrained_mse": untrained,
        "transformed_rows": len(predicted),
        "transformed_mse": float(((predicted["y__output"] - predicted["y"]) ** 2).mean()),
        "published": sorted(os.listdir(published)),
    })


@workflow
def torch_estimator_wf(epochs: int = 3, kill_rank_1_at_step: int = 0) -> str:
    return torch_estimator(epochs=epochs, kill_rank_1_at_step=kill_rank_1_at_step)
