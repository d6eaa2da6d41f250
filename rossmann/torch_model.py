"""The Rossmann model in PyTorch: the Keras model's twin (``rossmann.model``), layer for layer.

Entity embeddings of every categorical column, the continuous columns standardised with the training split's mean and
variance and clipped to +-CLIP standard deviations, dense ReLU layers (L2-regularised kernels), dropout, a sigmoid
scaled to 1.2 * log(max sales): log sales. Saved as TorchScript (``model.pt``), so ``predict`` loads it with
``torch.jit.load`` and without this module.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from rossmann.atomic import replaced_whole
from rossmann.hyperparameters import CLIP, l2_penalty
from rossmann.metrics import rmspe_scale
from rossmann.model_dir import TORCH_MODEL
from rossmann.prepared import ContinuousStats, Metadata, model_inputs

EPSILON = 1e-3  # Adam's epsilon, as the Keras model's optimizer (the reference example's)


class RossmannNet(nn.Module):
    """Inputs: ``categorical`` (n, categorical columns) int64 vocabulary indices (0 = unknown) and ``continuous``
    (n, continuous columns) float32, both in ``metadata``'s column order; output: (n,) log sales."""

    def __init__(self, embedding_sizes: Sequence[int], mean: Sequence[float], variance: Sequence[float],
                 hidden: Sequence[int], dropout: float, embedding_width: int, max_sales: float, l2: float):
        super().__init__()
        self.l2 = l2
        self.embeddings = nn.ModuleList(nn.Embedding(int(n), embedding_width) for n in embedding_sizes)
        for embedding in self.embeddings:  # Keras's default: uniform in [-0.05, 0.05]
            nn.init.uniform_(embedding.weight, -0.05, 0.05)
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(variance, dtype=torch.float32).sqrt().clamp_min(1e-7))
        self.register_buffer("log_scale", torch.zeros(()))  # the RMSPE calibration, log(c)
        width = len(embedding_sizes) * embedding_width + len(mean)
        layers: list[nn.Module] = []
        for units in hidden:
            layers += [nn.Linear(width, units), nn.ReLU()]
            width = units
        self.dense = nn.Sequential(*layers)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(width, 1)
        self.top, self.clip = 1.2 * math.log(max_sales), CLIP

    def forward(self, categorical: torch.Tensor, continuous: torch.Tensor) -> torch.Tensor:
        parts = [embedding(categorical[:, i]) for i, embedding in enumerate(self.embeddings)]
        parts.append(((continuous - self.mean) / self.std).clamp(-self.clip, self.clip))
        x = self.dropout(self.dense(torch.cat(parts, dim=1)))
        return torch.sigmoid(self.out(x)).squeeze(1) * self.top + self.log_scale

    def l2_penalty(self) -> torch.Tensor:
        """The Keras model's kernel regularizer: l2 * the sum of squares of the dense layers' kernels."""
        return self.l2 * sum((layer.weight ** 2).sum() for layer in self.dense if isinstance(layer, nn.Linear))


def build_torch_model(metadata: Metadata, stats: ContinuousStats, hidden: Sequence[int], dropout: float,
                      embedding_width: int = 10) -> RossmannNet:
    """The model for a prepared-data directory's metadata and continuous statistics (the Keras model's L2 penalty)."""
    continuous = list(metadata["continuous_cols"])
    return RossmannNet([metadata["embedding_sizes"][c] for c in metadata["categorical_cols"]],
                       [stats[c][0] for c in continuous], [stats[c][1] for c in continuous], hidden, dropout,
                       embedding_width, float(metadata["max_sales"]), l2_penalty(metadata["rows"]["train"]))


def torch_inputs(pdf: pd.DataFrame, metadata: Metadata) -> tuple[torch.Tensor, torch.Tensor]:
    """(categorical int64, continuous float32) tensors of a frame's rows (checked as ``model_inputs`` checks)."""
    inputs = model_inputs(pdf, metadata)
    categorical = np.hstack([inputs[c] for c in metadata["categorical_cols"]]).astype(np.int64)
    continuous = np.hstack([inputs[c] for c in metadata["continuous_cols"]])
    return torch.from_numpy(categorical), torch.from_numpy(continuous)


def predict_log_sales(model: nn.Module, pdf: pd.DataFrame, metadata: Metadata, batch_size: int = 16384) -> np.ndarray:
    """Predicted log sales of every row (dropout off), as a 1-D float64 array; ``model`` may be TorchScript."""
    categorical, continuous = torch_inputs(pdf, metadata)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            parts = [model(categorical[i:i + batch_size], continuous[i:i + batch_size])
                     for i in range(0, len(pdf), batch_size)]
    finally:
        model.train(was_training)
    return torch.cat(parts).double().numpy() if parts else np.zeros(0)


def fill_untrained_embeddings(model: RossmannNet, metadata: Metadata) -> dict[str, int]:
    """Category values the training split never had get the mean embedding of those it had (as the Keras model's
    ``fill_untrained_embeddings``); return how many rows were set per column."""
    filled = {}
    columns = list(metadata["categorical_cols"])
    for col, values in metadata.get("untrained", {}).items():
        if not values:
            continue
        vocab = list(metadata["vocab"][col])
        rows = sorted(vocab.index(v) + 1 for v in values)
        weights = model.embeddings[columns.index(col)].weight
        trained = [i for i in range(1, weights.shape[0]) if i not in set(rows)]
        if trained:
            with torch.no_grad():
                weights[rows] = weights[trained].mean(dim=0)
            filled[col] = len(rows)
    return filled


def calibrate_for_rmspe(model: RossmannNet, rows: pd.DataFrame, metadata: Metadata) -> float:
    """Scale the model's sales by the factor that minimises RMSPE on ``rows`` (see ``rossmann.model``'s twin); the
    factor is kept in the model as ``log_scale``. Returns the factor."""
    scale = rmspe_scale(predict_log_sales(model, rows, metadata), rows[metadata["label_col"]].to_numpy(np.float64))
    with torch.no_grad():
        model.log_scale += math.log(scale)
    return scale


def save_torchscript(model: RossmannNet, out_dir: str | os.PathLike) -> Path:
    """Write ``model.pt`` (TorchScript, dropout off) into ``out_dir`` whole; return its path."""
    path = Path(out_dir) / TORCH_MODEL
    model.eval()
    with replaced_whole(path) as tmp:
        torch.jit.save(torch.jit.script(model), str(tmp))
    return path
