"""The Rossmann Keras model: entity embeddings + dense layers, predicting log sales.

Built only from built-in, serializable Keras layers so that Horovod's Estimator can ship it to its
workers as HDF5 (a Python-function activation cannot be deserialized there).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import tensorflow as tf

from rossmann.hyperparameters import CLIP, l2_penalty
from rossmann.metrics import SCORED_LOG_SALES, rmspe_scale
from rossmann.prepared import ContinuousStats, Metadata

LOSS = "mae"


@tf.keras.saving.register_keras_serializable(package="rossmann")
def exp_rmspe(y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
    """RMSPE of a batch, from log sales (rows with log sales <= 0.001, i.e. sales <= 1, are ignored)."""
    y_true = tf.cast(y_true, y_pred.dtype)
    pct = tf.square((tf.exp(y_true) - tf.exp(y_pred)) / tf.exp(y_true))
    scored = y_true > SCORED_LOG_SALES
    total = tf.reduce_sum(tf.where(scored, pct, tf.zeros_like(pct)))
    count = tf.reduce_sum(tf.cast(scored, pct.dtype))
    return tf.sqrt(tf.math.divide_no_nan(total, count))


# For tf.keras.models.load_model and the Horovod Estimator: both the plain and the registered name.
CUSTOM_OBJECTS = {"exp_rmspe": exp_rmspe, "rossmann>exp_rmspe": exp_rmspe}


def build_model(
    metadata: Metadata,
    stats: ContinuousStats,
    hidden: Sequence[int] = (1000, 1000, 1000, 500),
    dropout: float = 0.5,
    embedding_width: int = 10,
    l2: float | None = None,
) -> tf.keras.Model:
    """An uncompiled model with one (1,)-shaped Input per feature column, named after the column.

    Categorical inputs (int32 vocabulary indices, 0 = unknown) get embeddings; continuous inputs are
    standardised with `stats` (train mean and variance) and clipped to +-CLIP; the output is a sigmoid scaled to
    1.2 * log(max_sales), i.e. log sales. The dense layers' kernels have the L2 penalty `l2` (default: ``l2_penalty``
    of the training split's rows).
    """
    l2 = l2_penalty(metadata["rows"]["train"]) if l2 is None else l2
    layers = tf.keras.layers
    categorical, continuous = list(metadata["categorical_cols"]), list(metadata["continuous_cols"])
    indices = {c: layers.Input(shape=(1,), name=c, dtype="int32") for c in categorical}
    values = {c: layers.Input(shape=(1,), name=c, dtype="float32") for c in continuous}

    parts = [
        layers.Flatten(name=f"flat_{c}")(
            layers.Embedding(int(metadata["embedding_sizes"][c]), embedding_width, name=f"emb_{c}")(indices[c])
        )
        for c in categorical
    ]
    x = layers.Concatenate(name="continuous")(list(values.values()))
    mean, variance = [stats[c][0] for c in continuous], [stats[c][1] for c in continuous]
    x = layers.Normalization(mean=mean, variance=variance, name="standardise")(x)
    # clipped to [-CLIP, CLIP] standard deviations (shift, ReLU with a ceiling, shift back: built-in layers only), so
    # a value far outside the training range (a store only in test.csv with no competitor, a record heat wave)
    # cannot swing the prediction by extrapolating
    x = layers.Rescaling(1.0, offset=CLIP, name="clip_shift")(x)
    x = layers.ReLU(max_value=2 * CLIP, name="clip")(x)
    parts.append(layers.Rescaling(1.0, offset=-CLIP, name="clip_unshift")(x))
    x = layers.Concatenate(name="features")(parts)
    for i, width in enumerate(hidden):
        regularizer = tf.keras.regularizers.l2(l2)
        x = layers.Dense(width, activation="relu", kernel_regularizer=regularizer, name=f"dense_{i}")(x)
    x = layers.Dropout(dropout, name="dropout")(x)
    x = layers.Dense(1, activation="sigmoid", name="sigmoid")(x)
    output = layers.Rescaling(1.2 * math.log(float(metadata["max_sales"])), name="Sales_log")(x)
    return tf.keras.Model([*indices.values(), *values.values()], output, name="rossmann")


def fill_untrained_embeddings(model: tf.keras.Model, metadata: Metadata) -> dict[str, int]:
    """Give every category value the training split never had (``metadata["untrained"]``, e.g. a store only in
    test.csv) the mean embedding of the values it had, i.e. "an average store", instead of its random initial
    one; return how many rows were set per column."""
    filled = {}
    for col, values in metadata.get("untrained", {}).items():
        if not values:
            continue
        vocab = list(metadata["vocab"][col])
        rows = sorted(vocab.index(v) + 1 for v in values)
        layer = model.get_layer(f"emb_{col}")
        weights = layer.get_weights()[0]
        trained = [i for i in range(1, len(weights)) if i not in set(rows)]
        if trained:
            weights[rows] = weights[trained].mean(axis=0)
            layer.set_weights([weights])
            filled[col] = len(rows)
    return filled


def calibrate_for_rmspe(model: tf.keras.Model, rows: pd.DataFrame, metadata: Metadata) -> tuple[tf.keras.Model, float]:
    """The model with its sales scaled by the factor that minimises RMSPE on `rows` (training rows), and the factor.

    MAE on log sales makes the model predict the median of sales; RMSPE, which weighs an error by 1 / true sales, is
    lowest for a lower prediction (for log-normal noise of spread s, the median times exp(-1.5 s^2)). The factor
    c = sum(r) / sum(r^2), r = predicted / true sales, is that optimum for one common scale; it is added to the
    output as log(c) with a built-in layer, so the saved model predicts calibrated log sales.
    """
    from rossmann.predict import predict_log_sales

    scale = rmspe_scale(predict_log_sales(model, rows, metadata), rows[metadata["label_col"]].to_numpy(np.float64))
    output = tf.keras.layers.Rescaling(1.0, offset=math.log(scale), name="rmspe_calibration")(model.output)
    return tf.keras.Model(model.inputs, output, name=model.name), scale


def make_optimizer(learning_rate: float) -> tf.keras.optimizers.Optimizer:
    """Adam with the reference example's epsilon."""
    return tf.keras.optimizers.Adam(learning_rate=learning_rate, epsilon=1e-3)


def compile_model(model: tf.keras.Model, optimizer: tf.keras.optimizers.Optimizer) -> tf.keras.Model:
    """Compile with MAE on log sales and the exp_rmspe metric."""
    model.compile(optimizer=optimizer, loss=LOSS, metrics=[exp_rmspe])
    return model
