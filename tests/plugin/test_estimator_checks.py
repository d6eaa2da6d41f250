"""Column counts that cannot match the model fail when ``fit`` is called, before any Spark job, saying what to change
(Horovod says only what is wrong, after writing the DataFrame to the store). ``fit(None)``: no DataFrame is read."""

import pytest

from flytekitplugins.horovod import HorovodConfigError


@pytest.fixture(scope="module")
def keras_model():
    import tensorflow as tf

    inputs = tf.keras.Input(shape=(1,), name="x")
    return tf.keras.Model(inputs, tf.keras.layers.Dense(1)(inputs))


@pytest.mark.parametrize("features, labels, label_shapes, said", [
    (["a", "b"], ["y"], None, r"Feature column count 2 must equal model inputs count 1: pass feature_cols= one column "
                              r"per model input \(1, .*\), or give the model one keras.Input per feature column"),
    (["a"], ["y", "z"], None, r"Label column count 2 must equal model outputs count 1: pass label_cols= one column per "
                              r"model output \(1\), or give the model one output per label column"),
    (["a"], ["y"], [[1], [1]], r"Label column count 1 must equal provided label shapes count 2: pass label_shapes= one "
                               r"shape per label column \(1\), or leave label_shapes unset"),
])
def test_keras_estimator_counts_are_checked_before_the_fit(keras_model, features, labels, label_shapes, said):
    from horovod.spark.keras import KerasEstimator

    estimator = KerasEstimator(model=keras_model, feature_cols=features, label_cols=labels, label_shapes=label_shapes)
    with pytest.raises(HorovodConfigError, match=r"^KerasEstimator: " + said):
        estimator.fit(None)
    with pytest.raises(HorovodConfigError, match=said):
        estimator.fit_on_parquet()


def test_torch_estimator_input_shapes_are_checked_and_a_matching_call_goes_on():
    import torch
    from horovod.spark.torch import TorchEstimator

    estimator = TorchEstimator(model=torch.nn.Linear(1, 1), input_shapes=[[-1, 1]], feature_cols=["a", "b"],
                               label_cols=["y"])
    with pytest.raises(HorovodConfigError, match=r"^TorchEstimator: Feature column count 2 must equal model inputs "
                                                 r"count 1: .* or give input_shapes= one shape per feature column"):
        estimator.fit(None)
    estimator.setFeatureCols(["a"])
    with pytest.raises(Exception) as past:  # past the check: Horovod's own fit, which needs a DataFrame
        estimator.fit(None)
    assert not isinstance(past.value, HorovodConfigError), past.value
