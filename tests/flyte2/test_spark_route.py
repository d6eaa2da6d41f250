"""The Spark route on Flyte 2 (``flyteplugins.horovod.spark``), beside its runs (``test_no_flytekit``: ``spark_run``
and ``HorovodRunner`` on 2 Spark-task ranks in a session with a slot per rank; docs/flyte2.md's ``flyte run --local``;
``test_migrate``): the config is checked when made, as v1's; and the serialized task is flyteplugins-spark's
``SparkJob`` with the slots the ranks need, what the Flyte 2 backend reads: flyteorg/flyte ``main`` (tag v2.0.43, commit
6fadb90d65af26f4db908ec1c5f5af546a3e4299), executor/plugins/loader.go loads
flyteplugins/go/tasks/plugins/k8s/spark/spark.go, whose ``getSparkConfig`` copies the custom's ``sparkConf`` over the
defaults and sizes the executors from its ``spark.executor.instances`` and ``spark.executor.cores``."""

import pytest

pytestmark = pytest.mark.needs_framework("pytorch")
pytest.importorskip("flyteplugins.spark", reason="flyteplugins-spark (flyteplugins-horovod's spark extra) is not installed")

from flyteplugins.horovod import Horovod, HorovodConfigError, HorovodSpark  # noqa: E402


@pytest.mark.parametrize("kwargs, message", [
    ({"num_proc": 0}, "HorovodSpark(num_proc=0): needs a whole number of Horovod ranks, at least one"),
    ({"num_proc": 3, "spark_conf": {"spark.executor.instances": "1", "spark.executor.cores": "2"}},
     "HorovodSpark(num_proc=3) needs 3 Spark task slots at once, but spark_conf gives 2: spark.executor.instances=1 x "
     "spark.executor.cores=2 x spark.task.cpus=(default)"),
    ({"horovod": {"stall_timeout": 8}}, "HorovodSpark.horovod must be a Horovod(...) settings object, got dict"),
])
def test_a_config_that_cannot_run_is_refused_when_made(kwargs, message):
    with pytest.raises(HorovodConfigError) as refused:
        HorovodSpark(**kwargs)
    assert message in str(refused.value)


def _custom(config: HorovodSpark) -> dict:
    import flyte
    from flyte.models import SerializationContext

    def body(x: float) -> float:
        return x

    task = flyte.TaskEnvironment(name="hvd_spark_serialization", plugin_config=config).task(body)
    assert task.task_type == "spark"
    return task.custom_config(SerializationContext(version="v1"))


def test_the_spark_job_has_the_slots_the_ranks_need_and_keeps_the_users_settings():
    from flytekitplugins.horovod.spark import HorovodSpark as V1HorovodSpark
    from flytekitplugins.horovod.spark import horovod_spark_conf

    custom = _custom(HorovodSpark(num_proc=4, spark_conf={"spark.executor.cores": "2", "spark.driver.memory": "4g"},
                                  horovod=Horovod(stall_timeout=30)))
    assert custom["sparkConf"] == {"spark.executor.cores": "2", "spark.driver.memory": "4g", "spark.task.cpus": "1",
                                   "spark.executor.instances": "2"}  # 2 executors x 2 cores: 4 ranks at once
    v1 = V1HorovodSpark(num_proc=4, spark_conf={"spark.executor.cores": "2", "spark.driver.memory": "4g"})
    assert custom["sparkConf"] == horovod_spark_conf(v1.spark_conf, v1.num_proc)  # what the v1 task serializes
    # flyteplugins-spark's own fields as it writes them (applicationType PYTHON is the enum's zero, left out by JSON)
    assert custom["mainApplicationFile"].startswith("local://") and custom["executorPath"] == "/opt/venv/bin/python"
