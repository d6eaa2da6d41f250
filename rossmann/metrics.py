"""Root mean square percentage error (Kaggle's Rossmann metric), in numpy and as a Keras metric."""
from __future__ import annotations

import numpy as np
import tensorflow as tf


def rmspe(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """RMSPE of sales, ignoring rows whose true sales are 0 (as Kaggle scores it)."""
    y_true = np.asarray(y_true, dtype=np.float64).ravel()
    y_pred = np.asarray(y_pred, dtype=np.float64).ravel()
    if y_true.shape != y_pred.shape:
        raise ValueError(f"rmspe: {y_true.shape[0]} true values but {y_pred.shape[0]} predictions")
    scored = y_true != 0
    if not scored.any():
        raise ValueError("rmspe: every true value is 0, nothing to score")
    pct = (y_true[scored] - y_pred[scored]) / y_true[scored]
    return float(np.sqrt(np.mean(pct**2)))


SCORED_LOG_SALES = 0.001  # rows with log sales at or below it (sales <= 1) are not scored from log sales


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
