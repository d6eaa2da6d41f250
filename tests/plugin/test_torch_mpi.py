"""PyTorch on the MPI route, run as a user runs it (``pyflyte run``): real ``horovod.torch`` ranks under Gloo and
mpirun, a raising rank named, an elastic job that loses a worker, and a framework this build lacks refused at once."""

import ast
import re
import subprocess
import sys

import pytest

FLOWS = "tests/plugin/flows/torch_flows.py"


def _step(output: str):
    match = re.search(r"Step\(total=([\d.]+), size=(\d+), weights_equal=(\w+), moved=(\w+), "
                      r"grouped_averages=(\w+)\)", output)
    assert match, output[-3000:]
    return float(match[1]), int(match[2]), match[3] == "True", match[4] == "True", match[5] == "True"


@pytest.mark.smoke
@pytest.mark.parametrize("workflow", ["torch_gloo_wf", "torch_mpirun_wf"])
def test_two_pytorch_ranks_allreduce_and_take_a_distributed_optimizer_step(pyflyte_run, workflow):
    ran = pyflyte_run(FLOWS, workflow, env={"FLYTE_HOROVOD_VERBOSE": "1"})
    assert ran.returncode == 0, ran.output[-3000:]
    # 0 + 1; one set of weights after the step, not the start's; DistributedOptimizer(groups=1) averages as the
    # per-tensor default does (patch 0015's flat buffer)
    assert _step(ran.output) == (1.0, 2, True, True, True)
    # rank 1 really ran: its line, tagged by the launcher (Gloo: [1], mpirun: [1,1])
    assert re.search(r"\[(1|1,1)\]<stdout>:rank 1 of 2: allreduce -> 1.0", ran.output), ran.output[-3000:]
    assert "framework pytorch" in ran.output  # rank 0's start line: the plugin initialised horovod.torch


def test_a_pytorch_rank_that_raises_is_named_with_its_host(pyflyte_run):
    ran = pyflyte_run(FLOWS, "torch_failing_wf", timeout=120)
    assert ran.returncode != 0
    assert re.search(r"Horovod rank 1 failed on host \S+", ran.output), ran.output[-3000:]
    assert "ValueError: rank one has no data" in ran.output


@pytest.mark.serial  # asserts how fast: alone, not beside other tests (make test)
def test_a_framework_this_build_lacks_fails_before_any_rank_starts(pyflyte_run):
    ran = pyflyte_run(FLOWS, "mxnet_wf", timeout=60)
    assert ran.returncode != 0
    assert "HorovodConfigError" in ran.output and "Horovod(framework='mxnet'): MXNet" in ran.output, ran.output[-3000:]
    assert "this build serves: tensorflow, keras, pytorch" in ran.output and "HOROVOD_WITH_MXNET=1" in ran.output
    assert "Horovod world of" not in ran.output  # no rank started
    assert ran.seconds < 10, f"took {ran.seconds:.1f} s"


def test_the_build_report_lists_the_frameworks_whose_init_and_allreduce_run():
    """What scripts/setup.sh prints as "horovod built with": both frameworks really run; asking for one that does
    not (mxnet) fails and says why."""
    command = [sys.executable, "-m", "horovod_flyte_runtime.build_info", "--expect"]
    done = subprocess.run(command + ["tensorflow", "pytorch"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "frameworks: TensorFlow PyTorch; controllers: MPI Gloo"
    missing = subprocess.run(command + ["mxnet"], capture_output=True, text=True, timeout=300)
    assert missing.returncode == 1 and "mxnet: Horovod(framework='mxnet'): MXNet" in missing.stderr, missing.stderr


@pytest.mark.slow
def test_an_elastic_pytorch_job_loses_a_worker_mid_epoch_and_finishes_on_two(pyflyte_run):
    ran = pyflyte_run(FLOWS, "torch_elastic_wf", "--epochs", "6", "--kill_at_epoch", "2", timeout=600)
    assert ran.returncode == 0, ran.output[-4000:]
    match = re.search(r"Trained\(size=(\d+), epochs=(\d+), sizes_seen=(\[[^\]]*\]), loss=([\d.e+-]+)\)", ran.output)
    assert match, ran.output[-3000:]
    size, epochs, sizes, loss = int(match[1]), int(match[2]), ast.literal_eval(match[3]), float(match[4])
    assert size == 2 and sizes[:3] == [3, 3, 3] and sizes[-1] == 2  # 3 workers until epoch 2, then 2
    assert epochs == 6 and loss < 1e-3  # it went on to the last epoch and learned the line
    assert "exit with status code 137" in ran.output or "Killed" in ran.output  # the worker really died
