"""The model directory a training task writes and ``predict`` reads, for either framework.

- ``model/``: the Keras model (TensorFlow SavedModel), or ``model.pt``: the PyTorch model (TorchScript, loadable with
  ``torch.jit.load`` and no training code);
- ``history.json``: {metric: [value per epoch]};
- ``metrics.json``: best_val_exp_rmspe, best_epoch, backtest_rmspe, rmspe_scale, epochs, ranks, train_rows,
  framework, ...
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rossmann.atomic import atomic_write

log = logging.getLogger(__name__)

KERAS_MODEL = "model"
TORCH_MODEL = "model.pt"
HISTORY = "history.json"
METRICS = "metrics.json"

History = dict[str, list[float]]


def framework(model_dir: str | os.PathLike) -> str:
    """"pytorch" or "keras": which kind of model a model directory (or the Keras ``model/`` folder itself) holds."""
    path = Path(model_dir)
    if (path / TORCH_MODEL).is_file():
        return "pytorch"
    if (path / KERAS_MODEL).is_dir() or (path / "saved_model.pb").is_file():
        return "keras"
    raise FileNotFoundError(f"{path}: no model (neither {KERAS_MODEL}/ nor {TORCH_MODEL}); is it a model directory?")


def plain_history(history: Mapping[str, Sequence[float]]) -> History:
    """A history with plain floats (JSON-serialisable)."""
    return {k: [float(v) for v in values] for k, values in history.items()}


def write_history_and_metrics(out_dir: str | os.PathLike, history: Mapping[str, Sequence[float]],
                              extra_metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Write history.json and metrics.json (the best epoch by val_exp_rmspe, plus ``extra_metrics``); return the
    metrics."""
    out = Path(out_dir)
    history = plain_history(history)
    metrics: dict[str, Any] = {"epochs": len(history.get("loss", []))}
    val = history.get("val_exp_rmspe")
    if val:
        best = int(np.argmin(val))
        metrics.update(best_val_exp_rmspe=val[best], best_epoch=best + 1, final_val_exp_rmspe=val[-1])
    metrics.update(extra_metrics)
    atomic_write(out / HISTORY, json.dumps(history, indent=1))
    atomic_write(out / METRICS, json.dumps(metrics, indent=1))
    log.info("wrote %s: %s", out, metrics)
    return metrics


def load_training_outputs(model_dir: str | os.PathLike) -> tuple[History, dict[str, Any]]:
    """history.json and metrics.json of a model directory."""
    model_dir = Path(model_dir)
    return json.loads((model_dir / HISTORY).read_text()), json.loads((model_dir / METRICS).read_text())
