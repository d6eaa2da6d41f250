"""The prepared-data directory (metadata.json + train/val/test Parquet): written whole by ``rossmann.features.prepare``,
read for training and prediction."""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rossmann.atomic import replaced_whole

log = logging.getLogger(__name__)

Metadata = Mapping[str, Any]
# Per continuous column: (mean, variance) over the training split.
ContinuousStats = dict[str, tuple[float, float]]
METADATA = "metadata.json"
ROWS_PER_FILE = 200_000  # at most, about: more rows make more files (and row groups) than min_row_groups


def check_output_dir(out_dir: str | os.PathLike) -> None:
    """Refuse to replace a folder that holds files but is not a prepared-data directory (FileExistsError)."""
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not os.path.isfile(os.path.join(out_dir, METADATA)):
        raise FileExistsError(f"{out_dir} exists and is not an earlier prepare() output; not overwriting it")


def write_prepared(splits: Mapping[str, Any], metadata: Metadata, out_dir: str | os.PathLike,
                   min_row_groups: int) -> None:
    """Write each split (a Spark DataFrame; one file, hence at least one row group, per partition) as Parquet, then
    metadata.json, into a folder that replaces ``out_dir`` once complete (``rossmann.atomic``); RuntimeError if a
    split has fewer than ``min_row_groups`` row groups (one per reading rank at least)."""
    check_output_dir(out_dir)
    with replaced_whole(out_dir) as tmp:
        for name, df in splits.items():
            rows, path = metadata["rows"][name], os.path.join(tmp, name)
            df.repartition(max(min_row_groups, math.ceil(rows / ROWS_PER_FILE))).write.parquet(path)
            groups = len(parquet_pieces(path))
            if groups < min_row_groups:
                raise RuntimeError(f"{path}: {groups} row groups written, {min_row_groups} needed")
            log.info("wrote %s: %d rows, %d row groups", name, rows, groups)
        _write_metadata(os.path.join(tmp, METADATA), metadata)


def _write_metadata(path: str, metadata: Metadata) -> None:
    with open(path, "w") as f:
        json.dump(metadata, f, indent=1)


def load_metadata(prepared_dir: str | os.PathLike) -> dict[str, Any]:
    """The prepared directory's metadata.json."""
    path = os.path.join(prepared_dir, METADATA)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no {METADATA}; is {prepared_dir} a prepared-data directory?")
    with open(path) as f:
        return json.load(f)


def feature_cols(metadata: Metadata) -> list[str]:
    """Model inputs, in model order: categorical columns, then continuous columns."""
    return list(metadata["categorical_cols"]) + list(metadata["continuous_cols"])


def parquet_files(dataset_dir: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """The Parquet files of a dataset directory, a local path or an fsspec URL (Spark's _SUCCESS and hidden files
    skipped), sorted."""
    fs, root = fsspec.core.url_to_fs(str(dataset_dir), **(storage_options or {}))
    files = sorted(path for path in fs.find(root)
                   if path.endswith(".parquet") and not os.path.basename(path).startswith((".", "_")))
    if not files:
        raise FileNotFoundError(f"{dataset_dir}: no Parquet files")
    return files


def parquet_pieces(dataset_dir: str | os.PathLike) -> list[tuple[str, int]]:
    """Every (file, row group) of a local Parquet dataset directory, in a stable order."""
    return [(f, g) for f in parquet_files(dataset_dir) for g in range(pq.ParquetFile(f).num_row_groups)]


def count_rows(dataset_dir: str | os.PathLike) -> int:
    """Rows of a Parquet dataset, from the file footers only."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in parquet_files(dataset_dir))


def read_split(
    dataset_dir: str | os.PathLike,
    columns: Sequence[str] | None = None,
    shard: tuple[int, int] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """A Parquet dataset, a local path or an fsspec URL (or, with shard=(rank, size), every size-th row group from the
    rank-th) as pandas."""
    fs, _ = fsspec.core.url_to_fs(str(dataset_dir), **(storage_options or {}))
    with contextlib.ExitStack() as files:
        parts = [pq.ParquetFile(files.enter_context(fs.open(f, "rb")))
                 for f in parquet_files(dataset_dir, storage_options)]
        pieces = [(part, g) for part in parts for g in range(part.num_row_groups)]
        if shard is not None:
            rank, size = shard
            if len(pieces) < size:
                raise ValueError(f"{dataset_dir}: {len(pieces)} row groups cannot be shared by {size} ranks")
            pieces = pieces[rank::size]
        return pa.concat_tables([part.read_row_group(g, columns=columns) for part, g in pieces]).to_pandas()


def continuous_stats(prepared_dir: str | os.PathLike, metadata: Metadata) -> ContinuousStats:
    """Mean and variance of every continuous column over the whole training split (to normalise inputs)."""
    cols = list(metadata["continuous_cols"])
    pdf = read_split(os.path.join(prepared_dir, "train"), columns=cols)
    return {c: (float(pdf[c].mean()), float(pdf[c].var(ddof=0))) for c in cols}


def model_inputs(pdf: pd.DataFrame, metadata: Metadata) -> dict[str, np.ndarray]:
    """Model input arrays, one (n, 1) array per feature column: int32 categoricals, float32 continuous.

    Raises ValueError naming the columns that hold missing or non-finite values.
    """
    missing = [c for c in feature_cols(metadata) if c not in pdf.columns]
    if missing:
        raise KeyError(f"prepared data lacks feature columns {missing}")
    categorical, continuous = list(metadata["categorical_cols"]), list(metadata["continuous_cols"])
    bad = {c: int(n) for c, n in pdf[categorical].isna().sum().items() if n}
    bad.update({c: int(n) for c, n in (~np.isfinite(pdf[continuous].astype(np.float64))).sum().items() if n})
    if bad:
        raise ValueError(f"missing or non-finite feature values (rows per column): {bad}")
    inputs = {c: pdf[c].to_numpy(np.int32).reshape(-1, 1) for c in categorical}
    inputs.update({c: pdf[c].to_numpy(np.float32).reshape(-1, 1) for c in continuous})
    return inputs
