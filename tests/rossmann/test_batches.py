"""The in-memory batches the MPI route trains on, and the warm-up of the learning-rate schedule (what rossmann.batches
and rossmann.schedule promise). The Spark route's in-memory data module is Horovod's, patched in by the plugin
(tests/plugin/test_in_memory_data.py)."""

from __future__ import annotations

import numpy as np
import pytest

from rossmann.batches import shuffled_batches
from rossmann.hyperparameters import WARMUP_EPOCHS
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


def test_the_rate_warms_up_in_equal_steps_then_follows_the_half_cosine():
    epochs = 20
    cosine = [0.5 * (1 + np.cos(np.pi * e / epochs)) for e in range(epochs)]
    steps = [half_cosine(e, epochs) for e in range(epochs)]
    for e in range(WARMUP_EPOCHS):
        assert steps[e] == pytest.approx(cosine[e] * (e + 1) / (WARMUP_EPOCHS + 1))
    assert steps[WARMUP_EPOCHS:] == pytest.approx(cosine[WARMUP_EPOCHS:])
    assert half_cosine(0, epochs, warmup=0) == 1.0
