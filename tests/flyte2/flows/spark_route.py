"""Flyte 2 Spark-route tasks for tests/flyte2: a ``HorovodSpark`` environment whose body runs Horovod's Run API
(``spark_run``) and ``HorovodRunner`` on two ranks, one Spark task each, in the task's local session."""

import flyte

from flyteplugins.horovod import HorovodRunner, HorovodSpark, spark_run

spark_env = flyte.TaskEnvironment(name="hvd_spark", plugin_config=HorovodSpark(num_proc=2))


def _allreduce(x: float) -> str:
    import horovod.torch as hvd
    import torch

    total = hvd.allreduce(torch.tensor([x * (hvd.rank() + 1)]), op=hvd.Sum).item()
    return f"rank {hvd.rank()} of {hvd.size()}: {total}"


@spark_env.task
def spark_allreduce(x: float) -> str:
    """Both APIs in one body: the Run API's rank 0 result, then HorovodRunner's, in this task's session."""
    slots = flyte.ctx().data["spark_session"].sparkContext.defaultParallelism  # flyteplugins-spark's session
    run_api = spark_run(_allreduce, {"x": x})
    runner = HorovodRunner(np=2).run(_allreduce, x=x)
    return f"{run_api} | {runner} | {slots} slots"
