"""HorovodJob: kfmpi's elastic config and serialization, with a local run that is really elastic."""

import ast
import re

import pytest
from flytekit import task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekitplugins.kfmpi import HorovodJob as KfmpiHorovodJob

from flytekitplugins.horovod import Horovod, HorovodConfigError, HorovodJob, Launcher, Worker

SETTINGS = SerializationSettings(image_config=ImageConfig.auto_default_image(), project="p", domain="d", version="v")
FLOWS = "tests/plugin/flows/elastic_flows.py"

# fault, stall and liveness timings are what these tests assert: make test runs them alone
pytestmark = pytest.mark.serial


def _body() -> int:
    return 1


def test_custom_is_kfmpis_and_the_command_is_kfmpis_with_the_elastic_bounds():
    ours = task(task_config=HorovodJob(worker=Worker(replicas=3), slots=2, min_workers=2, max_workers=4,
                                       horovod=Horovod(fusion_threshold_mb=16)))(_body)
    theirs = task(task_config=KfmpiHorovodJob(worker=Worker(replicas=3), launcher=Launcher(replicas=1), slots=2))(_body)
    assert ours.task_type == theirs.task_type == "mpi"
    assert ours.get_custom(SETTINGS) == theirs.get_custom(SETTINGS)
    wrapped, kf = ours.get_command(SETTINGS), theirs.get_command(SETTINGS)
    # the launcher pod runs the plugin's launcher, which gives each worker the task's slots (propeller gives 1)
    assert wrapped[:6] == ["python", "-m", "horovod_flyte_runtime.cluster_launcher", "--slots", "2", "--"]
    cmd = wrapped[6:]
    at = kf.index("pyflyte-execute")
    assert cmd[at + len(Horovod(fusion_threshold_mb=16).horovodrun_args()):] == kf[at:]  # same per-rank command
    kf_prefix = kf[:at]
    kf_prefix[kf_prefix.index("--min-np") + 1], kf_prefix[kf_prefix.index("--max-np") + 1] = "4", "8"
    assert cmd[:at] == kf_prefix  # kfmpi's horovodrun, with min 2 x 2 and max 4 x 2 ranks
    assert cmd[at:at + 10] == ["--gloo", "--start-timeout", "60", "--stall-check-warning-time-seconds", "60",
                               "--stall-check-shutdown-time-seconds", "300", "--fusion-threshold-mb", "16",
                               "pyflyte-execute"]


@pytest.mark.parametrize("kwargs, message", [
    ({"worker": Worker(replicas=2), "min_workers": 3}, r"min_workers <= worker.replicas <= max_workers, got 3 <= 2"),
    ({"worker": Worker(replicas=2), "max_workers": 1}, r"got 2 <= 2 <= 1"),
    ({"worker": Worker(replicas=2), "horovod": Horovod(controller="mpi")}, "elastic Horovod runs on Gloo only"),
    ({"worker": Worker(replicas=2), "horovod": Horovod(framework="mxnet")}, "no elastic API for MXNet"),
    ({"worker": Worker(replicas=2), "min_workers": 1.5}, r"min_workers=1.5: must be a whole number"),
    ({}, r"needs worker=Worker\(replicas=N\)"),
])
def test_bad_elastic_configs_are_refused_when_declared(kwargs, message):
    with pytest.raises(HorovodConfigError, match=message):
        HorovodJob(**kwargs)


@pytest.mark.slow
def test_three_local_workers_one_killed_mid_training_the_job_finishes_on_two(pyflyte_run):
    ran = pyflyte_run(FLOWS, "elastic_wf", "--epochs", "6", "--kill_at_epoch", "2", timeout=600)
    assert ran.returncode == 0, ran.output[-4000:]
    match = re.search(r"Trained\(size=(\d+), epochs=(\d+), sizes_seen=(\[[^\]]*\]), loss=([\d.e+-]+)\)", ran.output)
    assert match, ran.output[-3000:]
    size, epochs, sizes, loss = int(match[1]), int(match[2]), ast.literal_eval(match[3]), float(match[4])
    assert size == 2 and sizes[:3] == [3, 3, 3] and sizes[-1] == 2  # 3 workers until epoch 2, then 2
    assert epochs >= 6 and loss < 1e-3  # it went on to the last epoch and learned the line
    assert "exit with status code 137" in ran.output or "Killed" in ran.output  # the worker really died
