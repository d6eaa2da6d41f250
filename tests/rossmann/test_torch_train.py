"""The PyTorch model and its training on 2 real Horovod ranks (Gloo, ``horovod.torch``), checkpoints and resume."""
import json
import math
import os
import shutil

import numpy as np
import pytest
import torch

from rossmann.metrics import rmspe, rmspe_scale
from rossmann.predict import load_model, predict_log_sales
from rossmann.prepared import continuous_stats, feature_cols, load_metadata, read_split
from rossmann.torch_model import build_torch_model, calibrate_for_rmspe, fill_untrained_embeddings
from rossmann.torch_train import _read_checkpoint
from rossmann.train_state import read_state, resume
from tests.rossmann._fixtures import BROKEN_STATE, check_broken_checkpoint_is_skipped

SMALL = dict(hidden=(64, 32), dropout=0.1, batch_size=64, learning_rate=3e-3)


@pytest.fixture(scope="module")
def data(prepared):
    metadata = load_metadata(prepared)
    cols = feature_cols(metadata) + ["Sales_log"]
    return metadata, read_split(prepared / "train", cols), read_split(prepared / "val", cols)


def _untrained(prepared, metadata):
    torch.manual_seed(0)
    return build_torch_model(metadata, continuous_stats(prepared, metadata), SMALL["hidden"], SMALL["dropout"])


def test_output_is_log_sales_in_range_and_scripts(prepared, data):
    metadata, train, _ = data
    model = _untrained(prepared, metadata)
    pred = predict_log_sales(model, train.iloc[:500], metadata)
    assert pred.shape == (500,) and np.isfinite(pred).all()
    assert (pred > 0).all() and (pred < 1.2 * math.log(metadata["max_sales"])).all()
    scripted = torch.jit.script(model)
    assert np.allclose(predict_log_sales(scripted, train.iloc[:500], metadata), pred)


def test_calibration_scales_sales_by_the_rmspe_optimum(prepared, data):
    metadata, train, _ = data
    model = _untrained(prepared, metadata)
    before = predict_log_sales(model, train, metadata)
    scale = calibrate_for_rmspe(model, train, metadata)
    assert scale == pytest.approx(rmspe_scale(before, train["Sales_log"]))
    after = predict_log_sales(model, train, metadata)
    assert np.allclose(after - before, math.log(scale), atol=1e-5)
    sales = np.exp(train["Sales_log"])
    assert rmspe(sales, np.exp(after)) < rmspe(sales, np.exp(before))


def test_untrained_values_get_the_mean_embedding(prepared, data):
    metadata, _, _ = data
    metadata = {**metadata, "untrained": {"Store": [metadata["vocab"]["Store"][0]]}}
    model = _untrained(prepared, metadata)
    assert fill_untrained_embeddings(model, metadata) == {"Store": 1}
    weights = model.embeddings[list(metadata["categorical_cols"]).index("Store")].weight.detach()
    assert torch.allclose(weights[1], weights[2:].mean(dim=0))


def run_two_ranks(prepared, out, **kwargs):
    """train_rank_torch on 2 real Horovod ranks (Gloo); the history of each rank."""
    import horovod.runner

    def rank_fn():
        from rossmann.torch_train import train_rank_torch

        return train_rank_torch(prepared, out, seed=1, **SMALL, **kwargs)

    return horovod.runner.run(rank_fn, num_proc=2, hosts="localhost:2", use_gloo=True)


@pytest.fixture(scope="module")
def two_rank_run(prepared, tmp_path_factory):
    work = tmp_path_factory.mktemp("torch-ranks")
    return work, run_two_ranks(prepared, work / "trained", epochs=2, checkpoint_dir=work / "checkpoint")


def test_two_ranks_train_the_same_model_and_write_the_model_directory(prepared, data, two_rank_run):
    metadata, _, val = data
    work, (history0, history1) = two_rank_run
    assert history0 == history1  # every epoch scored alike on both ranks: the same weights
    out = work / "trained"
    assert sorted(p.name for p in out.iterdir()) == ["history.json", "metrics.json", "model.pt"]
    history = json.loads((out / "history.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert history == history0 and set(history) == {"loss", "exp_rmspe", "val_loss", "val_exp_rmspe", "lr"}
    assert metrics["framework"] == "pytorch" and metrics["ranks"] == 2 and metrics["epochs"] == 2
    assert metrics["train_rows"] == 4800 and metrics["backtest_rows"] == 560
    assert history["val_exp_rmspe"][-1] < history["val_exp_rmspe"][0]
    untrained = rmspe(np.exp(val["Sales_log"]), np.exp(predict_log_sales(_untrained(prepared, metadata), val,
                                                                         metadata)))
    assert metrics["backtest_rmspe"] < 0.5 * untrained
    reloaded = load_model(out)  # TorchScript
    assert isinstance(reloaded, torch.jit.ScriptModule)
    again = rmspe(np.exp(val["Sales_log"]), np.exp(predict_log_sales(reloaded, val, metadata)))
    assert again == pytest.approx(metrics["backtest_rmspe"], rel=1e-5)


def test_a_restarted_run_goes_on_after_the_checkpoints_last_epoch(prepared, two_rank_run, tmp_path):
    work, [first, _] = two_rank_run
    state = read_state(work / "checkpoint")
    assert state.epochs_done == 2 and state.history == first and state.best == min(first["val_exp_rmspe"])
    history = run_two_ranks(prepared, tmp_path / "trained", epochs=4, checkpoint_dir=work / "checkpoint")[0]
    assert {k: v[:2] for k, v in history.items()} == first  # epochs 1-2 from the checkpoint, not trained again
    assert len(history["loss"]) == 4 and read_state(work / "checkpoint").epochs_done == 4
    # epochs 3-4 ran on the 4-epoch half cosine, from the restored weights: no jump back to a fresh start
    assert history["lr"][2:] == pytest.approx([3e-3 * 2 * 0.5 * (1 + math.cos(math.pi * e / 4)) for e in (2, 3)])
    assert history["loss"][2] < first["loss"][0]


@pytest.mark.parametrize("file, how, problem", [("last.pt", "truncated", "RuntimeError"),
                                                ("best.pt", "truncated", "OSError"), BROKEN_STATE])
def test_a_checkpoint_that_cannot_be_read_is_skipped_with_a_warning(two_rank_run, tmp_path, caplog, file, how,
                                                                    problem):
    check_broken_checkpoint_is_skipped(two_rank_run[0] / "checkpoint", tmp_path / "checkpoint", file, how, problem,
                                       lambda folder: resume(folder, _read_checkpoint), caplog)


def test_a_run_over_a_broken_checkpoint_starts_afresh_on_every_rank(prepared, two_rank_run, tmp_path):
    """best.pt cut to half: rank 0 finds the checkpoint unusable, every rank starts from epoch 1 (no rank waits in a
    collective the others skip) and writes a new checkpoint."""
    work, (first, _) = two_rank_run
    shutil.copytree(work / "checkpoint", tmp_path / "checkpoint")
    best = tmp_path / "checkpoint" / "current" / "best.pt"
    os.truncate(best, best.stat().st_size // 2)
    history0, history1 = run_two_ranks(prepared, tmp_path / "trained", epochs=1, checkpoint_dir=tmp_path / "checkpoint")
    assert history0 == history1 and len(history0["loss"]) == 1  # trained afresh: one epoch, not the checkpoint's
    assert read_state(tmp_path / "checkpoint").epochs_done == 1
