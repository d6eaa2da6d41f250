"""The TorchEstimator's ranks run TensorBoard without TensorFlow (``horovod_flyte_runtime.tensorboard_stub``): the job
of its real training function asks for it, a user's own function does not, and TensorBoard's stub writes the event
file without importing TensorFlow."""

import functools
import subprocess
import sys
import types

import torch

from horovod_flyte_runtime.rank import RankJob
from horovod_flyte_runtime.settings import Horovod
from horovod_flyte_runtime.tensorboard_stub import NO_TENSORFLOW, tensorboard_without_tensorflow


def _users_own_body(steps: int) -> int:
    return steps


def test_the_torch_estimators_training_function_runs_with_the_stub_and_a_users_own_does_not(tmp_path):
    from horovod.spark.common.store import Store
    from horovod.spark.torch import TorchEstimator, remote

    model = torch.nn.Linear(2, 1)
    estimator = TorchEstimator(store=Store.create(str(tmp_path / "store")), model=model,
                               optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                               loss=torch.nn.functional.mse_loss, input_shapes=[[-1, 2]], feature_cols=["x"],
                               label_cols=["y"], batch_size=4, epochs=1)
    trainer = remote.RemoteTrainer(estimator, metadata={}, last_checkpoint_state=None, run_id="run", dataset_idx=None)
    # as the Estimator hands it to the backend, and the backend to the ranks (estimator_backend.RanksOnSpark.run)
    job = RankJob.of(functools.partial(trainer, b"model"), {}, str(tmp_path), Horovod())
    assert job.tensorboard_stub and job.settings.framework == "pytorch"
    assert not RankJob.of(_users_own_body, {"steps": 1}, str(tmp_path), Horovod(framework="pytorch")).tensorboard_stub


def test_with_the_stub_tensorboard_writes_its_events_without_tensorflow(tmp_path):
    code = ("import os, sys\n"
            "from horovod_flyte_runtime.tensorboard_stub import tensorboard_without_tensorflow\n"
            "tensorboard_without_tensorflow()\n"
            "from torch.utils.tensorboard import SummaryWriter\n"
            f"with SummaryWriter({str(tmp_path)!r}) as writer:\n"
            "    writer.add_scalar('loss', 0.5, 0)\n"
            "print('tensorflow' in sys.modules, len(os.listdir(" + repr(str(tmp_path)) + ")))\n")
    ran = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stdout
    assert ran.stdout.splitlines()[-1] == "False 1", ran.stdout


def test_where_tensorflow_is_already_imported_tensorboard_keeps_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", types.ModuleType("tensorflow"))
    monkeypatch.delitem(sys.modules, NO_TENSORFLOW, raising=False)
    tensorboard_without_tensorflow()
    assert NO_TENSORFLOW not in sys.modules
