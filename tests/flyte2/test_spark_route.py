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


def test_a_plain_spark_task_s_local_session_has_its_spark_conf_and_v1_s_quick_driver(tmp_path):
    """flyteplugins-spark's local session drops the task's spark_conf; with this plugin imported it is the session a
    v1 local run's Spark task gets (flyteplugins.horovod.local_spark): its spark_conf, the driver on loopback, and
    the v1 plugin's quick-start JVM."""
    import json

    from tests.support import ROOT, VENV_BIN, leftovers, run_command

    ran = run_command([str(VENV_BIN / "flyte"), "run", "--local", "tests/flyte2/flows/plain_spark.py",
                       "session_settings", "--out", str(tmp_path / "settings.json")], cwd=ROOT, timeout=300)
    assert ran.returncode == 0, ran.output[-3000:]
    settings = json.loads((tmp_path / "settings.json").read_text())
    assert (settings["partitions"], settings["driver_memory"], settings["ui"]) == ("7", "2g", "false"), settings
    assert settings["bind_address"] == "127.0.0.1", settings
    assert "-XX:TieredStopAtLevel=1" in settings["jvm"] and "-XX:+UseSerialGC" in settings["jvm"], settings
    assert leftovers(ran.marker) == []
