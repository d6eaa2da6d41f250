"""The Estimator's data: the prepared splits put into its store as they are, for ``fit_on_parquet``, so that no Spark
job materialises a DataFrame (Horovod's ``prepare_data`` rewrites every row through Spark, about a quarter of the
default train task, docs/performance.md); and the data module its ranks read them with, in memory."""
from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from horovod.spark.common.datamodule import DataModule

from rossmann.batches import shuffled_batches
from rossmann.prepared import feature_cols, model_inputs, parquet_pieces, read_split


@contextlib.contextmanager
def splits_in_store(prepared: Path, store: Any, ranks: int) -> Iterator[str]:
    """Copy the prepared train and val Parquet files to the store's train and val data paths of a new dataset
    index, and yield that index; the copies (and the metadata Horovod caches next to them) are removed after."""
    dataset = uuid.uuid4().hex
    paths = {"train": store.get_train_data_path(dataset), "val": store.get_val_data_path(dataset)}
    try:
        for name, path in paths.items():
            pieces = parquet_pieces(prepared / name)
            if len(pieces) < ranks:
                raise ValueError(f"{prepared / name}: {len(pieces)} Parquet row groups cannot be shared by {ranks} "
                                 "ranks (rossmann.features.prepare writes min_row_groups; set it to the ranks or more)")
            dest = store.get_localized_path(path)
            store.fs.makedirs(dest, exist_ok=True)
            for file in sorted({f for f, _ in pieces}):
                store.fs.put_file(file, f"{dest}/{os.path.basename(file)}")
        yield dataset
    finally:
        for path in paths.values():
            for leftover in (store.get_localized_path(path), store.get_data_metadata_path(path)):
                if store.fs.exists(leftover):
                    store.fs.rm(leftover, recursive=True)


class InMemoryShards(DataModule):
    """The Estimator's data module (``KerasEstimator(data_module=...)``, in place of Horovod's petastorm one): each
    rank reads its row groups of the train and val Parquet in the store once, keeps them in memory (this data is
    small: 100 bytes a row) and trains on ``rossmann.batches.shuffled_batches``, a new order every epoch. Horovod's
    petastorm pipeline cannot cache shuffled data (``inmemory_cache_all`` applies to unshuffled data only), so it
    re-reads and un-batches every row each epoch: half of an epoch on these cores (docs/performance.md section 8)."""

    short_name = "rossmann-in-memory"

    def __init__(self, categorical_cols: list[str] | None = None, continuous_cols: list[str] | None = None,
                 label_cols: list[str] | None = None, random_seed: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        if not categorical_cols or not continuous_cols or not label_cols or len(label_cols) != 1:
            raise ValueError("InMemoryShards needs the Estimator's categorical_cols, continuous_cols and one label col")
        self.categorical_cols, self.continuous_cols = list(categorical_cols), list(continuous_cols)
        self.label_col, self.random_seed = label_cols[0], random_seed
        self.shards: dict[str, tuple[dict[str, np.ndarray], np.ndarray]] = {}

    def _read(self, url: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
        columns = {"categorical_cols": self.categorical_cols, "continuous_cols": self.continuous_cols}
        pdf = read_split(url, [*feature_cols(columns), self.label_col], shard=(self.cur_shard, self.shard_count),
                         storage_options=self.storage_options)
        return model_inputs(pdf, columns), pdf[self.label_col].to_numpy(np.float32).reshape(-1, 1)

    def __enter__(self) -> InMemoryShards:
        self.shards = {"train": self._read(self.train_dir)}
        if self.has_val:
            self.shards["val"] = self._read(self.val_dir)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shards = {}

    def train_data(self) -> Any:
        seed = None if self.random_seed is None else self.random_seed + 1000 * self.cur_shard  # each rank its order
        return shuffled_batches(*self.shards["train"], self.train_batch_size, seed=seed, shuffle=self.shuffle)

    def val_data(self) -> Any:
        return shuffled_batches(*self.shards["val"], self.val_batch_size, shuffle=False) if self.has_val else None
