"""Vectorised prediction: whole batches per model call (Horovod's KerasModel.transform calls it once per row), for a
Keras or a PyTorch (TorchScript) model; neither framework is imported until a model of its kind is loaded."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rossmann.atomic import atomic_write
from rossmann.model_dir import KERAS_MODEL, TORCH_MODEL, framework
from rossmann.prepared import Metadata, feature_cols, load_metadata, model_inputs, read_split

log = logging.getLogger(__name__)

BATCH_SIZE = 16384
SUBMISSION = "submission.csv"  # the predictions directory's one file


def load_model(model_dir: str | os.PathLike, compile: bool = False) -> Any:
    """Load a saved model: a training output directory (holding model/ or model.pt), or the Keras model/ folder.

    A PyTorch model loads as TorchScript, without the training code's classes."""
    path = Path(model_dir)
    if framework(path) == "pytorch":
        import torch

        return torch.jit.load(str(path / TORCH_MODEL))
    import tensorflow as tf

    from rossmann.model import CUSTOM_OBJECTS

    if (path / KERAS_MODEL).is_dir():
        path = path / KERAS_MODEL
    return tf.keras.models.load_model(str(path), custom_objects=CUSTOM_OBJECTS, compile=compile)


def predict_log_sales(model: Any, pdf: pd.DataFrame, metadata: Metadata, batch_size: int = BATCH_SIZE) -> np.ndarray:
    """Predicted log sales of every row of pdf by a Keras or PyTorch model, as a 1-D float64 array."""
    if len(pdf) == 0:
        return np.zeros(0)
    torch = sys.modules.get("torch")  # a PyTorch model means torch is imported already
    if torch is not None and isinstance(model, torch.nn.Module):
        from rossmann.torch_model import predict_log_sales as predict_with_torch

        return predict_with_torch(model, pdf, metadata, batch_size)
    pred = model.predict(model_inputs(pdf, metadata), batch_size=batch_size, verbose=0)
    return np.asarray(pred, dtype=np.float64).reshape(-1)


def predict_submission(model: Any, test: pd.DataFrame | str | os.PathLike, metadata: Metadata,
                       batch_size: int = BATCH_SIZE) -> pd.DataFrame:
    """Kaggle submission rows [Id, Sales], one per test Id, sorted by Id; closed stores (Open == 0) get 0.

    `test` is the prepared test split, as a DataFrame or its Parquet directory.
    """
    pdf = test if isinstance(test, pd.DataFrame) else read_split(test, feature_cols(metadata) + ["Id", "Open"])
    for col in ("Id", "Open"):
        if col not in pdf.columns:
            raise KeyError(f"test data lacks column {col!r}")
    duplicated = pdf["Id"][pdf["Id"].duplicated()]
    if len(duplicated):
        raise ValueError(f"test data has {len(duplicated)} repeated Ids, e.g. {duplicated.iloc[:5].tolist()}")
    sales = np.exp(predict_log_sales(model, pdf, metadata, batch_size))
    closed = pdf["Open"].fillna(1).to_numpy() == 0  # Kaggle's test has a few unknown Open: predict them
    sales[closed] = 0.0
    log.info("predicted %d rows (%d closed)", len(pdf), int(closed.sum()))
    out = pd.DataFrame({"Id": pdf["Id"].to_numpy(np.int64), "Sales": sales})
    return out.sort_values("Id", kind="stable").reset_index(drop=True)


def submission_from_dirs(prepared_dir: str | os.PathLike, model_dir: str | os.PathLike) -> pd.DataFrame:
    """The submission of a training output directory's model for a prepared-data directory's test split."""
    return predict_submission(load_model(model_dir), Path(prepared_dir) / "test", load_metadata(prepared_dir))


def write_submission(df: pd.DataFrame, out_dir: str | os.PathLike) -> Path:
    """Write out_dir/submission.csv (header Id,Sales) atomically; return its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return atomic_write(out / SUBMISSION, df[["Id", "Sales"]].to_csv(index=False))
