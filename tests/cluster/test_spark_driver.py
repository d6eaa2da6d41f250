"""The Spark operator's driver, run here: the serialized Spark-route task (its SparkJob custom and container args) is
started the way the driver pod starts it -- the image's entrypoint in ``driver`` mode, i.e. ``spark-submit
--deploy-mode client --properties-file <the SparkJob's conf> <mainApplicationFile> <args>`` -- with
``--master local[2]`` instead of Kubernetes, and local input and output paths."""

import json
import os
import time

import pytest

from tests.cluster.backend import Attempt, observed_env, spark_driver, value, writes
from tests.cluster.registration import VENV_PYTHON
from tests.conftest import _leftovers

FLOWS = "tests.cluster.flows.cluster_flows"


def test_spark_driver_runs_the_registered_task_with_horovod_on_local_2(flows_registration, tmp_path):
    template = flows_registration.task(f"{FLOWS}.spark_allreduce")
    assert template.type == "spark"
    attempt = Attempt(tmp_path / "attempt")
    markers, log = tmp_path / "markers", tmp_path / "writes.log"
    attempt.write_inputs(template, {"scale": 2.0, "marker_dir": str(markers)})

    ran = spark_driver(template, attempt, tmp_path, master="local[2]", extra_env=observed_env(log))
    assert ran.returncode == 0, ran.output[-5000:]
    # the driver pod's command: the SparkJob's application file, then the registered args with propeller's paths
    assert ran.command[:5] == ["driver", "--master", "local[2]", "--properties-file", str(tmp_path / "spark.properties")]
    assert ran.command[5] == f"local://{os.path.dirname(VENV_PYTHON)}/entrypoint.py"
    assert ran.command[6:] == attempt.render(list(template.container.args))
    started = next(line for line in ran.output.splitlines() if line.startswith("entrypoint.sh: "))
    assert started.endswith("/bin/spark-submit --conf spark.driver.bindAddress=127.0.0.1 --deploy-mode client "
                            + " ".join(ran.command[1:]))

    outputs = {k: value(v) for k, v in attempt.outputs().items()}
    assert outputs["totals"] == [6.0, 6.0]  # rank 0 and rank 1 both saw 2*1 + 2*2
    assert outputs["rows"] == 1000
    conf = outputs["conf"]
    assert conf["master"] == "local[2]"
    assert conf["spark.sql.shuffle.partitions"] == "4"  # the SparkJob's conf reached the session
    assert conf["driver_python"] == VENV_PYTHON  # executorPath -> spark.pyspark.driver.python
    with open(os.path.join(outputs["model"], "weights.txt")) as f:
        assert f.read() == "total=6.0 rank=-1\n"

    # two Horovod ranks ran as Spark tasks, in processes other than the driver
    seen = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in markers.glob("rank-*.json")}
    assert sorted(seen) == [0, 1] and {s["size"] for s in seen.values()} == {2}
    driver = int(conf["driver_pid"])
    assert driver not in {s["pid"] for s in seen.values()}
    assert all(s["env"]["FLYTE_INTERNAL_EXECUTION_ID"] == attempt.execution_id for s in seen.values())

    # the driver, and only the driver, wrote outputs.pb once; no error document
    assert sorted(os.listdir(attempt.output_prefix)) == ["outputs.pb"]
    opened = [(w["path"], w["pid"]) for w in writes(log, attempt.output_prefix) if w["event"] == "open"]
    assert opened == [(str(attempt.output_prefix / "outputs.pb"), driver)], opened

    time.sleep(0.5)
    assert _leftovers(ran.marker) == [], "the driver left processes running"


@pytest.mark.parametrize("how, kind, headline, cause", [
    ("kill", "RECOVERABLE", "Horovod rank 1 died on host", "killed by SIGKILL"),
    ("raise", "NON_RECOVERABLE", "Horovod rank 1 failed on host", "ValueError: rank one cannot go on"),
])
@pytest.mark.serial  # which rank died is told by timing (the echo first, the cause within SETTLE_S): alone (make test)
def test_a_lost_rank_is_recoverable_and_a_failing_body_is_not(flows_registration, tmp_path, how, kind, headline,
                                                               cause):
    """What propeller reads from error.pb to decide whether `retries=` re-runs the task."""
    from flyteidl.core import errors_pb2

    template = flows_registration.task(f"{FLOWS}.spark_rank_fails")
    attempt = Attempt(tmp_path / "attempt")
    attempt.write_inputs(template, {"how": how})
    ran = spark_driver(template, attempt, tmp_path, master="local[2]")
    assert ran.returncode == 0, ran.output[-4000:]  # pyflyte-execute records the error and exits 0
    assert attempt.error_files() == ["error.pb"] and "outputs.pb" not in os.listdir(attempt.output_prefix)
    error = errors_pb2.ErrorDocument.FromString((attempt.output_prefix / "error.pb").read_bytes()).error
    assert errors_pb2.ContainerError.Kind.Name(error.kind) == kind, error
    assert headline in error.message and cause in error.message, error.message[-2000:]
    time.sleep(0.5)
    assert _leftovers(ran.marker) == []
