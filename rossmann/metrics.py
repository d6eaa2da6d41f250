"""Root mean square percentage error (Kaggle's Rossmann metric) and the RMSPE-optimal scale of predictions, in numpy
(framework-free: the Keras and the PyTorch model both use it; the Keras metric is ``rossmann.model.exp_rmspe``)."""
from __future__ import annotations

import numpy as np


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


def rmspe_scale(predicted_log_sales: np.ndarray, log_sales: np.ndarray) -> float:
    """The factor c that minimises the RMSPE of c * predicted sales on rows scored from log sales.

    With r = predicted / true sales, RMSPE^2 = mean((1 - c r)^2), lowest at c = sum(r) / sum(r^2); 1.0 when no row
    is scored."""
    log_sales = np.asarray(log_sales, dtype=np.float64).ravel()
    scored = log_sales > SCORED_LOG_SALES
    ratio = np.exp(np.asarray(predicted_log_sales, dtype=np.float64).ravel()[scored] - log_sales[scored])
    return float(ratio.sum() / np.square(ratio).sum()) if scored.any() else 1.0
