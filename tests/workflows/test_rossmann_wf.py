"""The flagship, end to end, as a user runs it: ``pyflyte run workflows/rossmann.py wf``, ``wf_mpi`` and ``wf_torch``.

On synthetic data the generator knows the true test sales, so these runs check what matters: the submission's
RMSPE on the test period against the perfect model's on the same rows, and that the backtest predicted it.
"""

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from rossmann import synthetic
from tests.support.console import MOST_LINES, printed_lines, printed_twice
from tests.support.prepared import make_prepared

WORKFLOWS = "workflows/rossmann.py"
# Another shape than the default data: other seed, more stores, other dates (the test period then holds Easter).
OTHER_SHAPE = {"seed": 7, "n_stores": 70, "start": "2013-05-01", "end": "2015-03-14"}


@pytest.fixture
def own_tmpdir():
    """A TMPDIR for one run alone, so that files of other runs on this machine are not counted as its leftovers."""
    path = Path(tempfile.mkdtemp(prefix="wf-"))  # short: sockets may be made under it
    yield path
    shutil.rmtree(path, ignore_errors=True)


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


def _check_forecast(ran, epochs: int, data_dir: Path, route: str, bound: float):
    """The run's backtest predicted its test RMSPE within 15%, both are within `bound` times the perfect model's,
    every epoch printed one line, and the summary and the submission's score were printed."""
    assert ran.returncode == 0, ran.output[-4000:]
    model, predictions = _outputs(ran.output)
    metrics = json.loads((model / "metrics.json").read_text())
    history = json.loads((model / "history.json").read_text())
    assert metrics["route"] == route and metrics["ranks"] == 2
    assert len(history["val_exp_rmspe"]) == metrics["epochs"] == epochs
    assert abs(metrics["backtest_rmspe"] / metrics["test_rmspe"] - 1) <= 0.15, metrics
    assert metrics["test_over_perfect"] <= bound and metrics["backtest_over_perfect"] <= bound, metrics
    epoch_lines = re.findall(r"rank 0: epoch (\d+)/(\d+): loss [\d.]+, backtest RMSPE [\d.]+, [\d.]+ s", ran.output)
    assert epoch_lines == [(str(i), str(epochs)) for i in range(1, epochs + 1)], ran.output[-4000:]
    assert re.search(r"backtest RMSPE [\d.]+ \(perfect model [\d.]+, [\d.]+x\); test RMSPE [\d.]+ \(perfect "
                     r"model [\d.]+ on the same \d+ rows, [\d.]+x\)", ran.output)
    scored = re.search(r"submission\.csv: test RMSPE ([\d.]+), perfect model ([\d.]+)", ran.output)
    assert scored and float(scored.group(1)) == pytest.approx(metrics["test_rmspe"], abs=1e-4)
    _check_submission(predictions, data_dir)
    return metrics


@pytest.mark.smoke
@pytest.mark.slow
def test_default_wf_forecasts_the_test_period_close_to_the_perfect_model(pyflyte_run, own_tmpdir, tmp_path):
    from workflows.rossmann import Hyperparameters

    ran = pyflyte_run(WORKFLOWS, "wf", env={"TMPDIR": str(own_tmpdir)}, timeout=900)
    left = list(own_tmpdir.glob("rossmann-checkpoint-*"))
    assert not left, f"rank 0's local checkpoint folder was left behind: {left}"
    report = synthetic.generate(str(tmp_path), n_stores=50, seed=0)  # the same default data, regenerated
    # the issue's bound for the default run (measured 1.05x test, 1.05x backtest)
    metrics = _check_forecast(ran, Hyperparameters().epochs, tmp_path, "spark-estimator", bound=1.10)
    # this run's console, as issues 31 and 35 ask of it (no second run of wf for it): at most MOST_LINES lines, none
    # twice, on every stack (TensorFlow's and the JVM's native start-up lines are filtered: executor/native_lines.py)
    printed = printed_lines(ran.output)
    assert len(printed) <= MOST_LINES, f"the default run printed {len(printed)} lines:\n{ran.output}"
    assert printed_twice(ran.output) == [], ran.output
    assert metrics["test_perfect_rmspe"] == pytest.approx(report.test_noise_floor_rmspe)
    assert metrics["backtest_perfect_rmspe"] == pytest.approx(report.backtest_noise_floor_rmspe)


@pytest.mark.slow
def test_wf_mpi_forecasts_data_of_another_shape(pyflyte_run, tmp_path):
    from workflows.rossmann import Hyperparameters

    ran = pyflyte_run(WORKFLOWS, "wf_mpi", "--hp", json.dumps(OTHER_SHAPE), timeout=900)
    assert "[1]<stderr>:" not in ran.output  # rank 1's lines go to the log file only (FLYTE_HOROVOD_VERBOSE=1: here)
    synthetic.generate(str(tmp_path), **OTHER_SHAPE)
    # a guard (measured 1.09x test and backtest): one store of 70 opens in the test period, its level unknowable
    metrics = _check_forecast(ran, Hyperparameters().epochs, tmp_path, "horovod-ranks", bound=1.15)
    assert metrics["ranks"] == 2  # a world of two ranks trained (every gradient allreduced with rank 1)


@pytest.mark.smoke
@pytest.mark.slow
def test_wf_torch_forecasts_the_default_data_as_well_with_the_same_outputs(pyflyte_run, tmp_path):
    from workflows.rossmann import Hyperparameters

    ran = pyflyte_run(WORKFLOWS, "wf_torch", timeout=900)
    synthetic.generate(str(tmp_path), n_stores=50, seed=0)  # the same default data, regenerated
    # the issue's bound (measured 1.06x test, 1.04x backtest)
    metrics = _check_forecast(ran, Hyperparameters().epochs, tmp_path, "horovod-ranks", bound=1.10)
    assert metrics["framework"] == "pytorch"
    model, _ = _outputs(ran.output)
    assert sorted(p.name for p in model.iterdir()) == ["history.json", "metrics.json", "model.pt"]
    # predict needs none of the training code: TorchScript loads in a process that imports torch alone
    row = "torch.zeros(1, {c}, dtype=torch.long), torch.zeros(1, {n})"
    meta = json.loads((_prepared_metadata(ran.output)).read_text())
    code = (f"import sys, torch; m = torch.jit.load({str(model / 'model.pt')!r}); "
            f"print(float(m({row.format(c=len(meta['categorical_cols']), n=len(meta['continuous_cols']))})[0])); "
            "assert not any(name.startswith('rossmann') for name in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0 and 0 < float(loaded.stdout) < 20, loaded.stderr[-2000:]


def _prepared_metadata(output: str) -> Path:
    """The prepared data's metadata.json, next to the train task's model in the run's working area."""
    model, _ = _outputs(output)
    found = list(model.parent.parent.glob("*/prepared/metadata.json"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.slow
@pytest.mark.parametrize("task, route", [("train", "spark-estimator"), ("train_mpi", "horovod-ranks")])
def test_a_model_over_16_mb_trains_through_both_routes(pyflyte_run, tmp_path, task, route):
    """Rank 0's result, the trained weights, is larger than Spark's direct task results (1 MB) and
    spark.task.maxDirectResultSize: on the Spark route it must come through the driver's block manager; on the MPI
    route every step allreduces gradients of that size. The training task alone, on prepared data written without
    Spark (the workflows around it are the tests above)."""
    prepared = make_prepared(tmp_path / "prepared", stores=4, train_days=120)
    hp = {"hidden": [2048, 2048], "epochs": 1}
    ran = pyflyte_run(WORKFLOWS, task, "--prepared", str(prepared), "--hp", json.dumps(hp), timeout=900)
    assert ran.returncode == 0, ran.output[-4000:]
    model = Path(ran.output.strip().splitlines()[-1])
    weights = sum(f.stat().st_size for f in (model / "model" / "variables").iterdir())
    assert weights > 16 * 2**20, weights
    metrics = json.loads((model / "metrics.json").read_text())
    assert metrics["epochs"] == 1 and metrics["route"] == route and metrics["ranks"] == 2


def test_bad_input_fails_before_training_naming_file_and_column(pyflyte_run, tmp_path):
    synthetic.generate(str(tmp_path), n_stores=4, start="2015-01-01", seed=1)
    store = tmp_path / "store.csv"
    store.write_text(store.read_text().replace("CompetitionDistance", "CompetitionDistanse", 1))
    ran = pyflyte_run(WORKFLOWS, "wf", "--data_dir", str(tmp_path), timeout=300)
    assert ran.returncode != 0
    flat = " ".join(ran.output.split())
    assert "RossmannDataError" in flat and "store.csv" in flat and "CompetitionDistance" in flat
    assert "launching" not in flat and "Horovod world" not in flat  # training never started


@pytest.mark.parametrize("hp, message", [
    ({"epoch": 3}, "unknown hyperparameter 'epoch': did you mean 'epochs'?"),
    ({"ranks": 4}, "'ranks' is not a hyperparameter: the rank count is the training tasks' config: RANKS = 2 in "
                   "workflows/rossmann.py"),
    ({"learning_rate": -1}, "learning_rate=-1: must be in (0.0, inf)"),
    ({"epochs": 0}, "epochs=0: must be at least 1"),
    ({"batch_size": 0}, "batch_size=0: must be at least 1"),
    ({"hidden": [256, "128"]}, "hidden width='128': must be an integer >= 1"),
])
def test_bad_hyperparameters_fail_before_any_task(pyflyte_run, hp, message):
    ran = pyflyte_run(WORKFLOWS, "wf", "--hp", json.dumps(hp), timeout=120)
    assert ran.returncode == 2, ran.output[-4000:]  # click's usage error
    flat = " ".join(ran.output.replace("│", " ").split())
    assert "Invalid value for '--hp'" in flat and message in flat, flat[-2000:]
    assert "Running Execution" not in flat  # no task started, nothing was written
