"""The Keras model and the RMSPE metrics."""
import math

import numpy as np
import pytest
import tensorflow as tf

from rossmann.hyperparameters import L2, L2_ROWS, l2_penalty
from rossmann.metrics import rmspe
from rossmann.model import (
    CUSTOM_OBJECTS,
    build_model,
    calibrate_for_rmspe,
    compile_model,
    exp_rmspe,
    fill_untrained_embeddings,
    make_optimizer,
)
from rossmann.predict import predict_log_sales
from rossmann.prepared import continuous_stats, feature_cols, load_metadata, model_inputs, read_split
from rossmann.torch_model import build_torch_model


@pytest.fixture(scope="module")
def data(prepared):
    """The prepared directory, its metadata, and its train and val splits as pandas."""
    metadata = load_metadata(prepared)
    cols = feature_cols(metadata) + ["Sales_log"]
    return prepared, metadata, read_split(prepared / "train", cols), read_split(prepared / "val", cols)


def test_rmspe_known_values_ignores_zero_sales():
    # errors of 10%, 10% and 0%; the zero-sales row is not scored
    assert rmspe([100, 200, 50, 0], [110, 180, 50, 999]) == pytest.approx(math.sqrt(0.02 / 3))
    with pytest.raises(ValueError):
        rmspe([0, 0], [1, 2])


def test_exp_rmspe_matches_numpy_on_log_sales():
    sales = np.array([100.0, 200.0, 50.0, 1.0])  # log(1) = 0: not scored, as in the reference metric
    pred = np.array([110.0, 180.0, 50.0, 7.0])
    got = exp_rmspe(tf.constant(np.log(sales)[:, None]), tf.constant(np.log(pred)[:, None], tf.float32))
    assert float(got) == pytest.approx(rmspe(sales[:3], pred[:3]), rel=1e-5)
    assert float(got) == pytest.approx(0.0816497, rel=1e-5)


def test_model_inputs_outputs_and_range(data):
    out, metadata, train, _ = data
    model = build_model(metadata, continuous_stats(out, metadata), hidden=(16,), dropout=0.0)
    assert model.input_names == feature_cols(metadata)
    assert len(model.inputs) == 36  # the fixture's 18 categorical and 18 continuous columns
    pred = predict_log_sales(model, train.iloc[:500], metadata)
    assert pred.shape == (500,)
    assert np.isfinite(pred).all()
    top = 1.2 * math.log(metadata["max_sales"])
    assert (pred > 0).all() and (pred < top).all()


def test_model_survives_h5_round_trip_like_the_estimator(data, tmp_path):
    """The Estimator ships the compiled model as HDF5; only built-in layers + the registered metric."""
    out, metadata, train, _ = data
    model = compile_model(build_model(metadata, continuous_stats(out, metadata), hidden=(8,)), make_optimizer(1e-3))
    builtin = {name for name in dir(tf.keras.layers)}
    assert all(type(layer).__name__ in builtin for layer in model.layers)
    model.save(tmp_path / "m.h5")
    with tf.keras.utils.custom_object_scope(CUSTOM_OBJECTS):
        again = tf.keras.models.load_model(tmp_path / "m.h5")
    rows = train.iloc[:100]
    np.testing.assert_allclose(predict_log_sales(again, rows, metadata), predict_log_sales(model, rows, metadata),
                               rtol=1e-6)
    scores = again.evaluate(model_inputs(rows, metadata), rows["Sales_log"].to_numpy(), return_dict=True, verbose=0)
    assert set(scores) == {"loss", "exp_rmspe"}


def test_training_reduces_val_rmspe(data):
    out, metadata, train, val = data
    tf.keras.utils.set_random_seed(0)
    model = compile_model(build_model(metadata, continuous_stats(out, metadata), hidden=(64, 32), dropout=0.1),
                          make_optimizer(2e-3))
    true_sales = np.exp(val["Sales_log"].to_numpy(np.float64))
    before = rmspe(true_sales, np.exp(predict_log_sales(model, val, metadata)))
    model.fit(model_inputs(train, metadata), train["Sales_log"].to_numpy(), batch_size=64, epochs=3, verbose=0)
    after = rmspe(true_sales, np.exp(predict_log_sales(model, val, metadata)))
    assert before > 0.5
    assert after < 0.35


def test_untrained_category_values_get_the_mean_of_the_trained_embeddings(data):
    """A store only in test.csv would otherwise be predicted with its random initial embedding."""
    out, metadata, _, _ = data
    model = build_model(metadata, continuous_stats(out, metadata), hidden=(8,), dropout=0.0)
    stores = metadata["vocab"]["Store"]
    untrained = {**metadata, "untrained": {"Store": [stores[-1]], "Promo": []}}
    before = model.get_layer("emb_Store").get_weights()[0].copy()
    assert fill_untrained_embeddings(model, untrained) == {"Store": 1}
    after = model.get_layer("emb_Store").get_weights()[0]
    last = len(stores)  # its row: vocabulary index + 1
    assert np.allclose(after[last], before[1:last].mean(axis=0)) and not np.allclose(before[last], after[last])
    assert np.array_equal(after[:last], before[:last])  # the trained rows (and row 0, unknown) are untouched


def test_calibration_scales_sales_to_the_rmspe_optimum_of_log_normal_noise(data, tmp_path):
    """Sales = the model's median x exp(N(0, 0.1^2)): the RMSPE-optimal factor is exp(-1.5 * 0.1^2), about 0.985;
    the calibrated model predicts exactly log(factor) more, scores a lower RMSPE, and survives a save and load."""
    out, metadata, train, _ = data
    model = build_model(metadata, continuous_stats(out, metadata), hidden=(8,), dropout=0.0)
    rows = train.sample(20_000, replace=True, random_state=0).reset_index(drop=True)
    median = predict_log_sales(model, rows, metadata)
    rows["Sales_log"] = median + np.random.default_rng(0).normal(0.0, 0.1, len(rows))
    calibrated, scale = calibrate_for_rmspe(model, rows, metadata)
    assert scale == pytest.approx(math.exp(-1.5 * 0.1 ** 2), abs=0.003)
    shifted = predict_log_sales(calibrated, rows, metadata)
    np.testing.assert_allclose(shifted, median + math.log(scale), atol=1e-5)
    sales = np.exp(rows["Sales_log"].to_numpy())
    assert rmspe(sales, np.exp(shifted)) < rmspe(sales, np.exp(median)) - 0.0005
    calibrated.save(str(tmp_path / "saved"), save_format="tf")
    again = tf.keras.models.load_model(str(tmp_path / "saved"), custom_objects=CUSTOM_OBJECTS, compile=False)
    np.testing.assert_allclose(predict_log_sales(again, rows.iloc[:100], metadata), shifted[:100], atol=1e-5)


@pytest.mark.parametrize("rows, penalty", [(1_000, L2), (L2_ROWS, L2), (789_765, L2 * L2_ROWS / 789_765)])
def test_the_l2_penalty_falls_as_1_over_the_training_rows_above_the_default_datas(rows, penalty):
    assert l2_penalty(rows) == pytest.approx(penalty)


def test_the_keras_and_the_pytorch_model_take_the_penalty_of_their_training_rows(data):
    prepared, metadata, _, _ = data
    bigger = {**metadata, "rows": {**metadata["rows"], "train": 4 * L2_ROWS}}
    stats = continuous_stats(prepared, metadata)
    keras = build_model(bigger, stats, hidden=(8, 4), dropout=0.0)
    penalties = [float(layer.kernel_regularizer.l2) for layer in keras.layers
                 if getattr(layer, "kernel_regularizer", None)]
    assert penalties == pytest.approx([L2 / 4, L2 / 4])  # the two hidden layers, not the output
    net = build_torch_model(bigger, stats, (8, 4), 0.0)
    squares = sum(float((layer.weight.detach() ** 2).sum()) for layer in net.dense if hasattr(layer, "weight"))
    assert net.l2_penalty().item() == pytest.approx(L2 / 4 * squares, rel=1e-5)  # what the PyTorch training adds
    assert float(build_model(metadata, stats, hidden=(8,), dropout=0.0, l2=0.0).get_layer("dense_0")
                 .kernel_regularizer.l2) == 0.0  # an explicit penalty (bench/recipe.py's variants)
