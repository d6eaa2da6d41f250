"""Horovod's in-memory Estimator data module (patches/0011), in process: what each rank reads, and the batches the
KerasEstimator's and the TorchEstimator's ranks get from it. test_spark_route.py and test_spark_torch.py fit and
transform both Estimators with it on Spark."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

COLUMNS = ["x", "v", "m", "y", "w"]  # a scalar, an array, an array of arrays, the label, the sample weight


def _dataset(folder, files=(10, 11, 12)) -> str:
    """Parquet files of 4-row row groups as Spark writes them (and its _SUCCESS and .crc files): row i has x = i,
    v = [i, 2i], m = [[i, 1], [2, 3]], y = 2i, w = 1 + i % 2."""
    folder.mkdir()
    first = 0
    for number, rows in enumerate(files):
        i = np.arange(first, first + rows, dtype=np.float64)
        pq.write_table(pa.table({"x": i, "v": pa.array([[r, 2 * r] for r in i]),
                                 "m": pa.array([[[r, 1.0], [2.0, 3.0]] for r in i]), "y": 2 * i, "w": 1 + i % 2}),
                       folder / f"part-{number}.parquet", row_group_size=4)
        first += rows
    (folder / "_SUCCESS").touch()
    (folder / ".part-0.parquet.crc").touch()
    return f"file://{folder}"


def test_each_rank_reads_a_near_equal_contiguous_share_and_array_columns_as_rows(tmp_path):
    from horovod.spark.common.datamodule import read_shard

    url, seen = _dataset(tmp_path / "train"), []
    for rank in range(3):
        share = read_shard(url, COLUMNS, rank, 3)
        assert share["x"].shape == (11,) and share["v"].shape == (11, 2) and share["m"].shape == (11, 4)
        assert (share["v"][:, 1] == 2 * share["x"]).all() and (share["m"][:, 0] == share["x"]).all()
        seen.extend(share["x"])
    assert seen == list(range(33))
    with pytest.raises(ValueError, match=r"train: 33 rows cannot be shared by 34 ranks"):
        read_shard(url, ["x"], 0, 34)


def test_both_estimators_default_to_it_where_petastorm_does_not_import():
    import horovod.spark.keras.datamodule as keras_data
    import horovod.spark.torch.datamodule as torch_data
    import torch
    from horovod.spark.common.datamodule import petastorm_imports
    from horovod.spark.keras import KerasEstimator
    from horovod.spark.torch import TorchEstimator

    keras, torch_ = KerasEstimator().getDataModule(), TorchEstimator(model=torch.nn.Linear(1, 1)).getDataModule()
    if petastorm_imports():
        assert (keras, torch_) == (keras_data.PetastormDataModule, torch_data.PetastormDataModule)
    else:
        assert (keras, torch_) == (keras_data.InMemoryDataModule, torch_data.InMemoryDataModule)


def _module(module_class, tmp_path, **kwargs):
    return module_class(train_dir=_dataset(tmp_path / "train"), val_dir=_dataset(tmp_path / "val", files=(5,)),
                        schema_fields=COLUMNS, train_batch_size=11, val_batch_size=2, random_seed=3, **kwargs)


def _check_passes(labels: np.ndarray) -> None:
    """Three passes over the 33 training rows (labels 0, 2, ..., 64): every row once a pass, in a new order each."""
    passes = [list(labels[i * 33:(i + 1) * 33]) for i in range(3)]
    assert [sorted(p) for p in passes] == [list(range(0, 66, 2))] * 3
    assert passes[0] != passes[1] != passes[2]


def test_keras_batches_are_shaped_by_the_estimators_make_dataset_and_fit_a_model_with_sample_weights(tmp_path):
    import tensorflow as tf
    from horovod.spark.keras.datamodule import InMemoryDataModule
    from horovod.spark.keras.util import TFKerasUtil

    plain = {"is_sparse_vector_only": False, "intermediate_format": "nochange"}
    make_dataset = TFKerasUtil.make_dataset_fn(
        feature_columns=["x", "v", "m"], label_columns=["y"], sample_weight_col="w",
        metadata={c: plain for c in COLUMNS}, input_shapes=[[-1, 1], [-1, 2], [-1, 2, 2]], label_shapes=[[-1, 1]],
        output_names=["out"])
    with _module(InMemoryDataModule, tmp_path, make_dataset=make_dataset) as data:
        train = data.train_data()
        (x, v, m), y, w = next(iter(train))
        assert (x.shape, v.shape, m.shape, y.shape, w["out"].shape) == ((11, 1), (11, 2), (11, 2, 2), (11, 1), (11,))
        assert np.array_equal(v.numpy()[:, 1:], 2 * x.numpy()) and np.array_equal(y.numpy(), 2 * x.numpy())
        _check_passes(np.concatenate([y.numpy().reshape(-1) for _, y, _ in train.take(9)]))
        assert train.options().autotune.enabled is False
        assert [list(y.numpy().reshape(-1)) for _, y, _ in data.val_data().take(3)] == [[0, 2], [4, 6], [8, 0]]

        inputs = [tf.keras.Input(shape=(1,)), tf.keras.Input(shape=(2,)), tf.keras.Input(shape=(2, 2))]
        flat = tf.keras.layers.Concatenate()([inputs[0], inputs[1], tf.keras.layers.Flatten()(inputs[2])])
        model = tf.keras.Model(inputs, tf.keras.layers.Dense(1, name="out")(flat))
        model.compile(optimizer="sgd", loss="mse")
        history = model.fit(train, validation_data=data.val_data(), steps_per_epoch=3, validation_steps=3, verbose=0)
        assert set(history.history) == {"loss", "val_loss"}


def test_torch_batches_are_tensors_by_column_each_pass_in_a_new_order(tmp_path):
    from horovod.spark.torch.datamodule import InMemoryDataModule

    with _module(InMemoryDataModule, tmp_path) as data:
        train = iter(data.train_data())
        batches = [next(train) for _ in range(9)]
        assert set(batches[0]) == set(COLUMNS)
        assert (batches[0]["x"].shape, batches[0]["v"].shape, batches[0]["m"].shape) == ((11,), (11, 2), (11, 4))
        assert all((b["y"] == 2 * b["x"]).all() and (b["w"] == 1 + b["x"] % 2).all() for b in batches)
        _check_passes(np.concatenate([b["y"].numpy() for b in batches]))
        assert [b["y"].tolist() for b, _ in zip(data.val_data(), range(3))] == [[0, 2], [4, 6], [8]]
    assert data.train is None


def test_a_transformation_fn_is_refused_naming_petastorm():
    from horovod.spark.torch.datamodule import InMemoryDataModule

    with pytest.raises(ValueError, match="transformation_fn is applied by PetastormDataModule only"):
        InMemoryDataModule(train_dir="x", val_dir="y", transform_fn=lambda row: row)
