"""The in-memory batches both Keras routes train on, the Estimator's data module that reads them, and the warm-up of
the learning-rate schedule (what rossmann.batches, rossmann.estimator_data and rossmann.schedule promise)."""

from __future__ import annotations

import numpy as np
import pytest

from rossmann.batches import shuffled_batches
from rossmann.estimator_data import InMemoryShards
from rossmann.hyperparameters import WARMUP_EPOCHS
from rossmann.prepared import load_metadata, read_split
from rossmann.schedule import half_cosine


def _passes(dataset, rows: int, batch: int, passes: int) -> list[np.ndarray]:
    """The label values of `passes` consecutive passes over `rows` rows (batch divides rows)."""
    steps = rows // batch
    labels = np.concatenate([y.numpy().reshape(-1) for _, y in dataset.take(steps * passes)])
    return [labels[i * rows:(i + 1) * rows] for i in range(passes)]


def test_every_pass_holds_every_row_once_in_a_new_order_and_inputs_stay_with_their_label():
    rows, batch = 96, 16
    labels = np.arange(rows, dtype=np.float32)
    inputs = {"Store": (np.arange(rows, dtype=np.int32) * 10).reshape(-1, 1), "x": labels.reshape(-1, 1) / 2}
    first, second = _passes(shuffled_batches(inputs, labels, batch, seed=3), rows, batch, 2)
    assert sorted(first) == sorted(second) == list(labels)
    assert list(first) != list(labels) and list(first) != list(second)  # shuffled, and anew each pass
    again = _passes(shuffled_batches(inputs, labels, batch, seed=3), rows, batch, 1)[0]
    assert list(again) == list(first)  # reproducible from the seed
    x, y = next(iter(shuffled_batches(inputs, labels, batch, seed=3)))
    assert np.array_equal(x["Store"].numpy().reshape(-1), (y.numpy() * 10).astype(np.int32))
    assert np.allclose(x["x"].numpy().reshape(-1), y.numpy() / 2)


def test_unshuffled_batches_keep_the_row_order():
    labels = np.arange(10, dtype=np.float32)
    dataset = shuffled_batches({"x": labels.reshape(-1, 1)}, labels, 4, shuffle=False)
    assert [list(y.numpy()) for _, y in dataset.take(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]


def test_the_batches_are_not_autotuned():
    """tf.data's autotuning thread made deleting the iterator at the end of Keras's fit wait 16 to 20 s (after 30
    epochs, about half of the default wf's runs): the pipeline runs without it."""
    labels = np.arange(8, dtype=np.float32)
    for shuffle in (True, False):
        dataset = shuffled_batches({"x": labels.reshape(-1, 1)}, labels, 4, shuffle=shuffle)
        assert dataset.options().autotune.enabled is False


def test_the_estimators_ranks_read_disjoint_shards_that_cover_the_split(prepared):
    metadata = load_metadata(prepared)
    whole = read_split(prepared / "train")
    cols = dict(categorical_cols=metadata["categorical_cols"], continuous_cols=metadata["continuous_cols"],
                label_cols=[metadata["label_col"]])
    seen = []
    for rank in range(2):
        module = InMemoryShards(train_dir=f"file://{prepared / 'train'}", val_dir=str(prepared / "val"),
                                cur_shard=rank, shard_count=2, train_batch_size=8, val_batch_size=8, random_seed=0,
                                make_dataset=None, **cols)  # an argument only petastorm's module uses is ignored
        with module as data:
            inputs, labels = data.shards["train"]
            assert set(inputs) == set(metadata["categorical_cols"]) | set(metadata["continuous_cols"])
            assert all(v.shape == (len(labels), 1) for v in inputs.values()) and labels.shape == (len(labels), 1)
            seen.extend(labels.reshape(-1).tolist())
            x, y = next(iter(data.val_data()))
            assert y.shape == (8, 1)
        assert data.shards == {}
    assert sorted(seen) == sorted(whole[metadata["label_col"]].astype(np.float32).tolist())


def test_the_module_refuses_an_estimator_without_its_columns():
    with pytest.raises(ValueError, match="categorical_cols, continuous_cols and one label col"):
        InMemoryShards(train_dir="x", val_dir="y", label_cols=["Sales_log"])


def test_the_rate_warms_up_in_equal_steps_then_follows_the_half_cosine():
    epochs = 20
    cosine = [0.5 * (1 + np.cos(np.pi * e / epochs)) for e in range(epochs)]
    steps = [half_cosine(e, epochs) for e in range(epochs)]
    for e in range(WARMUP_EPOCHS):
        assert steps[e] == pytest.approx(cosine[e] * (e + 1) / (WARMUP_EPOCHS + 1))
    assert steps[WARMUP_EPOCHS:] == pytest.approx(cosine[WARMUP_EPOCHS:])
    assert half_cosine(0, epochs, warmup=0) == 1.0
