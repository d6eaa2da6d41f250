"""Vectorised prediction, the submission file and the saved model directory."""
import json
import time

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from rossmann.model import build_model, compile_model, make_optimizer
from rossmann.predict import load_model, predict_log_sales, predict_submission, write_submission
from rossmann.prepared import continuous_stats, feature_cols, load_metadata, model_inputs, read_split
from rossmann.train import save_training_outputs


@pytest.fixture(scope="module")
def data(prepared):
    """The prepared directory and its metadata."""
    return prepared, load_metadata(prepared)


@pytest.fixture(scope="module")
def model(data):
    out, metadata = data
    tf.keras.utils.set_random_seed(0)
    return build_model(metadata, continuous_stats(out, metadata), hidden=(32,), dropout=0.0)


@pytest.fixture(scope="module")
def test_pdf(data):
    out, metadata = data
    return read_split(out / "test", feature_cols(metadata) + ["Id", "Open"])


def test_submission_one_sorted_row_per_id_and_closed_stores_zero(data, model, test_pdf):
    out, metadata = data
    sub = predict_submission(model, out / "test", metadata)
    assert list(sub.columns) == ["Id", "Sales"]
    assert len(sub) == len(test_pdf) and sub["Id"].is_unique
    assert sub["Id"].is_monotonic_increasing
    assert set(sub["Id"]) == set(test_pdf["Id"])
    assert sub["Sales"].notna().all()
    closed = set(test_pdf.loc[test_pdf["Open"] == 0, "Id"])
    assert 0 < len(closed) < len(sub)
    by_id = sub.set_index("Id")["Sales"]
    assert (by_id[sorted(closed)] == 0).all()
    assert (by_id.drop(sorted(closed)) > 0).all()

    # the same rows in another order give the same submission
    shuffled = test_pdf.sample(frac=1.0, random_state=3)
    pd.testing.assert_frame_equal(predict_submission(model, shuffled, metadata), sub)
    # and each open row's sales are exp(the model's log sales) for that row
    one = test_pdf[test_pdf["Open"] == 1].iloc[[0]]
    expected = float(np.exp(model(model_inputs(one, metadata), training=False)[0, 0]))
    assert by_id[one["Id"].iloc[0]] == pytest.approx(expected, rel=1e-5)


def test_prediction_is_much_faster_than_one_row_per_call(data, model, test_pdf):
    _, metadata = data
    big = pd.concat([test_pdf] * 80, ignore_index=True)
    big["Id"] = np.arange(1, len(big) + 1)
    predict_submission(model, big.iloc[:100], metadata)  # warm up
    start = time.perf_counter()
    predict_submission(model, big, metadata)
    vectorised = (time.perf_counter() - start) / len(big)

    rows = [model_inputs(big.iloc[[i]], metadata) for i in range(100)]
    model.predict_on_batch(rows[0])
    start = time.perf_counter()
    for row in rows:  # what horovod's KerasModel.transform does
        model.predict_on_batch(row)
    per_row = (time.perf_counter() - start) / len(rows)
    assert per_row / vectorised >= 20, f"only {per_row / vectorised:.1f}x faster"


def test_bad_test_data_is_refused(data, model, test_pdf):
    _, metadata = data
    with pytest.raises(ValueError, match="repeated Ids"):
        predict_submission(model, pd.concat([test_pdf, test_pdf.iloc[:2]]), metadata)
    with pytest.raises(KeyError, match="Open"):
        predict_submission(model, test_pdf.drop(columns=["Open"]), metadata)
    broken = test_pdf.copy()
    broken.loc[broken["Open"] == 1, "Mean_TemperatureC"] = np.nan
    with pytest.raises(ValueError, match="Mean_TemperatureC"):
        predict_submission(model, broken, metadata)


def test_write_submission_atomically(tmp_path):
    sub = pd.DataFrame({"Id": [1, 2, 3], "Sales": [0.0, 1234.5, 99.25]})
    (tmp_path / "submission.csv").write_text("stale")
    path = write_submission(sub, tmp_path)
    assert path == tmp_path / "submission.csv"
    assert path.read_text().splitlines()[0] == "Id,Sales"
    pd.testing.assert_frame_equal(pd.read_csv(path), sub)
    assert [p.name for p in tmp_path.iterdir()] == ["submission.csv"]


def test_saved_model_dir_reloads_and_predicts_the_same(data, model, tmp_path):
    out, metadata = data
    compile_model(model, make_optimizer(1e-3))
    history = {"loss": [0.5, 0.3], "val_loss": [0.4, 0.35], "val_exp_rmspe": [0.3, 0.25]}
    metrics = save_training_outputs(model, history, tmp_path, {"ranks": 1})
    assert metrics["best_val_exp_rmspe"] == 0.25 and metrics["best_epoch"] == 2 and metrics["epochs"] == 2
    assert json.loads((tmp_path / "metrics.json").read_text()) == metrics
    assert json.loads((tmp_path / "history.json").read_text()) == history
    save_training_outputs(model, history, tmp_path, {"ranks": 1})  # replaces the model whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.json", "metrics.json", "model"]

    val = read_split(out / "val", feature_cols(metadata))
    expected = predict_log_sales(model, val, metadata)
    np.testing.assert_allclose(predict_log_sales(load_model(tmp_path), val, metadata), expected, rtol=1e-6)
