"""PyTorch through the Spark route: spark_run and HorovodRunner ranks that initialise horovod.torch, and Horovod's
TorchEstimator fitted and transforming inside a HorovodSpark task, with a retry that resumes from the Flyte checkpoint.

The retry runs the way propeller runs it (``tests.cluster.backend``: the Spark driver entrypoint, one attempt after
the other, the second with ``--prev-checkpoint``); attempt 1 loses rank 1 (SIGKILL) in its third epoch."""

import json
import os
from collections import OrderedDict

import pytest
from flyteidl.core import errors_pb2

from tests.cluster.backend import Attempt, spark_driver, value
from tests.cluster.registration import VENV_PYTHON
from tests.plugin.flows import spark_torch_flows as flows

FLOWS = "tests/plugin/flows/spark_torch_flows.py"
EPOCHS = 4


def _output(ran) -> dict:
    return json.loads(ran.output.strip().splitlines()[-1])


def _assert_ranks_trained_together(ranks: list) -> None:
    assert [r["rank"] for r in ranks] == [0, 1] and {r["size"] for r in ranks} == {2}, ranks
    assert [r["sum"] for r in ranks] == [1.0, 1.0]  # allreduce of the rank numbers 0 + 1
    assert ranks[0]["initial"] == ranks[1]["initial"]  # seeded apart, then broadcast_parameters
    assert ranks[0]["trained"] == ranks[1]["trained"] != ranks[0]["initial"]  # averaged gradients, different data


@pytest.mark.smoke
def test_spark_run_and_horovod_runner_run_pytorch_ranks(pyflyte_run):
    ran = pyflyte_run(FLOWS, "torch_ranks_wf", timeout=300)
    assert ran.returncode == 0, ran.output[-3000:]
    out = _output(ran)
    _assert_ranks_trained_together(out["spark_run"])
    for result in (out["runner_spark"], out["runner_local"]):  # rank 0's return value
        assert result == out["spark_run"][0]


def test_a_failing_pytorch_rank_is_named_with_its_host(pyflyte_run):
    ran = pyflyte_run(FLOWS, "torch_failing_wf", timeout=180)
    assert ran.returncode != 0
    assert "RankFailedError" in ran.output and "Horovod rank 1 failed on host" in ran.output, ran.output[-3000:]
    assert "KeyError: 'torch rank one lost its key'" in ran.output


@pytest.mark.slow
def test_torch_estimator_fits_transforms_and_publishes_each_epoch(pyflyte_run):
    """With no data_module=: petastorm's where it imports, else Horovod's in-memory one (patches/0011), from an array
    column, with sample weights."""
    from horovod.spark.common.datamodule import petastorm_imports

    ran = pyflyte_run(FLOWS, "torch_estimator_wf", "--epochs", "3", timeout=400)
    assert ran.returncode == 0, ran.output[-3000:]
    out = _output(ran)
    assert out["data_module"] == ("PetastormDataModule" if petastorm_imports() else "InMemoryDataModule"), out
    assert out["epochs_done"] == 0 and len(out["train_loss"]) == 3, out
    assert out["train_loss"][-1] < out["train_loss"][0] / 2 and out["train_loss"][0] < out["untrained_mse"], out
    assert out["transformed_rows"] == 400 and out["transformed_mse"] < out["untrained_mse"] / 4, out
    assert out["lr"] == flows.LR  # Horovod returns the rate per rank
    assert out["published"] == ["epoch-3.pt"], out  # each epoch's checkpoint replaced the one before


def _template(entity):
    """The task's template as ``pyflyte package`` writes it for this venv."""
    from flytekit.configuration import ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    settings = SerializationSettings(image_config=ImageConfig.auto_default_image(), python_interpreter=VENV_PYTHON)
    return get_serializable(OrderedDict(), settings, entity).template.to_flyte_idl()


@pytest.mark.serial  # which rank died is told by timing (the echo first, the cause within SETTLE_S): alone (make test)
@pytest.mark.slow
def test_a_retry_after_a_lost_rank_resumes_the_torch_estimator_from_the_flyte_checkpoint(tmp_path):
    template = _template(flows.torch_estimator)
    first = Attempt(tmp_path / "attempt-1", execution_id="torchresume1", attempt=0)
    first.write_inputs(template, {"epochs": EPOCHS, "kill_rank_1_at_step": 2 * flows.STEPS + 3})  # in epoch 3
    ran = spark_driver(template, first, tmp_path, timeout=400)
    assert "outputs.pb" not in os.listdir(first.output_prefix), ran.output[-3000:]
    error = errors_pb2.ErrorDocument.FromString((first.output_prefix / "error.pb").read_bytes()).error
    assert error.kind == errors_pb2.ContainerError.RECOVERABLE, error.message[-2000:]  # so Flyte retries
    assert "RankLostError" in error.message and "rank 1" in error.message, error.message[-2000:]
    assert os.listdir(first.checkpoint_prefix / "torch-estimator") == ["epoch-2.pt"]

    retry = Attempt(tmp_path / "attempt-2", execution_id="torchresume1", attempt=1,
                    prev_checkpoint=first.checkpoint_prefix)
    retry.write_inputs(template, {"epochs": EPOCHS, "kill_rank_1_at_step": 0})
    ran = spark_driver(template, retry, tmp_path, timeout=400)
    assert ran.returncode == 0 and "error.pb" not in os.listdir(retry.output_prefix), ran.output[-4000:]
    assert f"resuming after epoch 2 of {EPOCHS}" in ran.output
    out = json.loads(value(retry.outputs()["o0"]))
    assert out["epochs_done"] == 2 and len(out["train_loss"]) == EPOCHS - 2, out  # only the epochs left
    assert out["published"] == [f"epoch-{EPOCHS}.pt"], out  # counted on from attempt 1's epochs
    # from attempt 1's weights: a fresh start's first epoch averages well above half the untrained loss (measured 0.64)
    assert out["train_loss"][0] < 0.5 * out["untrained_mse"], out
    # at the rank-scaled rate: Horovod's own resume trains at LR / ranks, and returns LR / ranks
    assert out["lr"] == flows.LR, out
    assert out["transformed_rows"] == 400 and out["transformed_mse"] < out["untrained_mse"] / 4, out


def test_spark_torch_resume_refuses_a_bad_epoch_count():
    from flytekitplugins.horovod import HorovodConfigError, spark_torch_resume

    with pytest.raises(HorovodConfigError, match=r"spark_torch_resume\(epochs=0\): needs a whole number of epochs, at "
                                                 r"least 1"):
        spark_torch_resume(0)
