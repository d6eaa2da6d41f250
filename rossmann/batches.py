"""In-memory training batches for a rank: the shard's arrays held as tensors, shuffled whole every epoch by index, and
each batch gathered at once. An element-wise ``from_tensor_slices(...).shuffle().batch()`` pipeline (or petastorm's
row-by-row ``unbatch``) costs more per step than this model's compute on these cores (docs/performance.md, section 8).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import tensorflow as tf


def shuffled_batches(inputs: Mapping[str, np.ndarray], labels: np.ndarray, batch_size: int,
                     seed: int | None = None, shuffle: bool = True) -> tf.data.Dataset:
    """An endless dataset of (inputs, labels) batches of ``batch_size`` rows; with ``shuffle``, every pass over the
    rows is in a new random order (reproducible from ``seed``)."""
    features = {name: tf.constant(values) for name, values in inputs.items()}
    target = tf.constant(labels)
    rows = tf.data.Dataset.range(len(labels))
    if shuffle:
        rows = rows.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)

    def gather(index: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        return {name: tf.gather(values, index) for name, values in features.items()}, tf.gather(target, index)

    # No autotuning: its thread re-plans the pipeline at periods that double while the iterator lives, and deleting the
    # iterator (at the end of Keras's fit) waited for it: 16 to 20 s after 30 epochs in about half of the default wf's
    # runs. One gather per batch, a batch ahead, needs no tuning.
    options = tf.data.Options()
    options.autotune.enabled = False
    return rows.repeat().batch(batch_size).map(gather).prefetch(2).with_options(options)
