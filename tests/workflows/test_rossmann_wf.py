"""The flagship, end to end, as a user runs it: ``pyflyte run workflows/rossmann.py wf`` and ``wf_mpi``."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from rossmann import synthetic

WORKFLOWS = "workflows/rossmann.py"
SMALL = '{"n_stores": 16, "start": "2014-01-01", "epochs": 3}'


def _outputs(output: str):
    match = re.search(r"Outputs\(model=(\S+), predictions=(\S+)\)", output)
    assert match, output[-4000:]
    return Path(match.group(1)), Path(match.group(2))


def _check_submission(predictions: Path, data_dir: Path):
    submission = pd.read_csv(predictions / "submission.csv")
    test = pd.read_csv(data_dir / "test.csv")
    assert list(submission.columns) == ["Id", "Sales"]
    assert submission["Id"].tolist() == sorted(test["Id"].tolist())  # one row per test Id, sorted
    assert submission["Sales"].notna().all() and (submission["Sales"] >= 0).all()
    closed = set(test.loc[test["Open"] == 0, "Id"])
    assert (submission.loc[submission["Id"].isin(closed), "Sales"] == 0).all()
    assert (submission.loc[~submission["Id"].isin(closed), "Sales"] > 0).all()


def test_default_wf_trains_close_to_the_noise_floor(pyflyte_run, tmp_path):
    ran = pyflyte_run(WORKFLOWS, "wf", timeout=900)
    assert ran.returncode == 0, ran.output[-4000:]
    model, predictions = _outputs(ran.output)
    metrics = json.loads((model / "metrics.json").read_text())
    history = json.loads((model / "history.json").read_text())
    assert (model / "model" / "saved_model.pb").exists()
    assert len(history["val_exp_rmspe"]) == metrics["epochs"] > 0
    # the acceptance target is 2x the floor (measured 1.26x); this guard is looser so noise cannot flake it
    assert metrics["val_rmspe"] < 3 * metrics["noise_floor_rmspe"], metrics
    assert re.search(r"validation RMSPE [\d.]+ after \d+ epochs on 2 ranks; noise floor [\d.]+", ran.output)
    report = synthetic.generate(str(tmp_path), n_stores=50, seed=0)  # the same default data, regenerated
    assert metrics["noise_floor_rmspe"] == pytest.approx(report.noise_floor_rmspe)
    _check_submission(predictions, tmp_path)


def test_wf_mpi_trains_with_mpijob_ranks(pyflyte_run, tmp_path):
    ran = pyflyte_run(WORKFLOWS, "wf_mpi", "--hp", SMALL, timeout=900)
    assert ran.returncode == 0, ran.output[-4000:]
    model, predictions = _outputs(ran.output)
    metrics = json.loads((model / "metrics.json").read_text())
    assert metrics["ranks"] == 2 and metrics["route"] == "horovod-ranks"
    assert "[1]<stderr>:[rank 1/2]" in ran.output  # rank 1 really trained
    assert metrics["val_rmspe"] < 4 * metrics["noise_floor_rmspe"], metrics
    synthetic.generate(str(tmp_path), n_stores=16, start="2014-01-01", seed=0)
    _check_submission(predictions, tmp_path)


def test_bad_input_fails_before_training_naming_file_and_column(pyflyte_run, tmp_path):
    synthetic.generate(str(tmp_path), n_stores=4, start="2015-01-01", seed=1)
    store = tmp_path / "store.csv"
    store.write_text(store.read_text().replace("CompetitionDistance", "CompetitionDistanse", 1))
    ran = pyflyte_run(WORKFLOWS, "wf", "--data_dir", str(tmp_path), timeout=300)
    assert ran.returncode != 0
    flat = " ".join(ran.output.split())
    assert "RossmannDataError" in flat and "store.csv" in flat and "CompetitionDistance" in flat
    assert "launching" not in flat and "Horovod world" not in flat  # training never started
