"""The Estimator's data: the prepared splits put into its store as they are, for ``fit_on_parquet``, so that no Spark
job materialises a DataFrame (Horovod's ``prepare_data`` rewrites every row through Spark, about a quarter of the
default train task, docs/performance.md). Its ranks read them into memory with Horovod's ``InMemoryDataModule``
(the plugin's patch series adds it: ``rossmann.train.fit_estimator``)."""
from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rossmann.prepared import parquet_files


@contextlib.contextmanager
def splits_in_store(prepared: Path, store: Any) -> Iterator[str]:
    """Copy the prepared train and val Parquet files to the store's train and val data paths of a new dataset
    index, and yield that index; the copies (and the metadata Horovod caches next to them) are removed after."""
    dataset = uuid.uuid4().hex
    paths = {"train": store.get_train_data_path(dataset), "val": store.get_val_data_path(dataset)}
    try:
        for name, path in paths.items():
            dest = store.get_localized_path(path)
            store.fs.makedirs(dest, exist_ok=True)
            for file in parquet_files(prepared / name):
                store.fs.put_file(file, f"{dest}/{os.path.basename(file)}")
        yield dataset
    finally:
        for path in paths.values():
            for leftover in (store.get_localized_path(path), store.get_data_metadata_path(path)):
                if store.fs.exists(leftover):
                    store.fs.rm(leftover, recursive=True)
