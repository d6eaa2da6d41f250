"""One contestant of bench/vs_mwms.py: the Rossmann Keras model (``rossmann.model``, compiled as ``train_rank``
compiles it) fitted for a fixed number of steps, the same model, rows, batches, optimizer and rate scaling whoever runs
it:

* ``horovod``: ``horovod.tensorflow.keras.DistributedOptimizer`` in ``model.fit`` (the project's recipe), launched by
  ``horovodrun``;
* ``mwms``: ``tf.distribute.MultiWorkerMirroredStrategy`` (one CPU replica a worker, TensorFlow's ring collectives),
  ``model.fit`` in its scope; ``--mode mwms`` with no ``TF_CONFIG`` starts the two workers itself, each with its
  ``TF_CONFIG``, as a cluster's launcher would;
* ``single``: one process, the global batch of both ranks, every core.

Global step ``s`` draws one global batch of ``batch x RANKS`` rows (the same rows for every contestant); rank ``r``
fits its ``r``-th part (each worker's dataset is its own: sharding off), the single process all of it. Adam's rate is
``learning_rate x RANKS``. The loss after the steps is the MAE of log sales on the same 4,096 training rows, so every
contestant is scored alike.

    python -m bench._keras_body --mode single --prepared DIR --threads 2     # prints RESULT {json} on rank 0
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any, Dict, Sequence

RANKS = 2
SCORED_ROWS = 4096


def train(mode: str, prepared: str, hidden: Sequence[int], batch: int, steps: int, warmup: int,
          threads: int, groups: int = 0) -> Dict[str, Any]:
    """Fit ``warmup + steps`` steps; samples per second over the last ``steps`` (all ranks' samples)."""
    import rossmann  # noqa: F401, I001  (before TensorFlow: tf.keras is then Keras 2, which Horovod's Keras API needs)
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    strategy = tf.distribute.MultiWorkerMirroredStrategy() if mode == "mwms" else None  # first, as TF asks
    rank, size = _start(mode, strategy)

    from rossmann.hyperparameters import DROPOUT, LEARNING_RATE
    from rossmann.model import build_model, compile_model, make_optimizer
    from rossmann.prepared import continuous_stats, feature_cols, load_metadata, model_inputs, read_split

    metadata = load_metadata(prepared)
    label = metadata["label_col"]
    frame = read_split(os.path.join(prepared, "train"), feature_cols(metadata) + [label])
    inputs, target = model_inputs(frame, metadata), frame[label].to_numpy(np.float32)
    local = batch if size > 1 else batch * RANKS
    rows = np.concatenate([_global_batch(step, len(target), batch * RANKS)[rank * local:(rank + 1) * local]
                           for step in range(warmup + steps)])
    dataset = tf.data.Dataset.from_tensor_slices(({c: a[rows] for c, a in inputs.items()}, target[rows]))
    dataset = dataset.batch(local)
    if strategy is not None:  # each worker fits its own part of every global batch, as the Horovod ranks do
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        dataset = dataset.with_options(options)
    tf.keras.utils.set_random_seed(0)  # the same initial weights in every contestant
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = build_model(metadata, continuous_stats(prepared, metadata), hidden, DROPOUT)
        optimizer = make_optimizer(LEARNING_RATE * RANKS)
        if mode == "horovod":
            import horovod.tensorflow.keras as hvd

            optimizer = hvd.DistributedOptimizer(optimizer, groups=groups or None)
        compile_model(model, optimizer)
    callbacks = [clock := _clock(warmup)]
    if mode == "horovod":
        callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))
    model.fit(dataset, epochs=1, steps_per_epoch=warmup + steps, callbacks=callbacks, verbose=0)
    scored = slice(0, SCORED_ROWS)
    predicted = model({c: a[scored] for c, a in inputs.items()}, training=False).numpy()[:, 0]
    return {"mode": mode, "rank": rank, "ranks": size, "threads": threads, "steps": steps,
            "samples_per_s": steps * batch * RANKS / clock.seconds, "seconds": clock.seconds,
            "final_loss": float(np.abs(predicted - target[scored]).mean())}


def _global_batch(step: int, rows: int, count: int):
    import numpy as np

    return np.random.default_rng(step).integers(0, rows, count)


def _clock(warmup: int):
    """A Keras callback whose ``seconds`` run from the end of the warm-up steps to the end of the last step."""
    import tensorflow as tf

    class Clock(tf.keras.callbacks.Callback):
        started = seconds = None

        def on_train_batch_end(self, batch, logs=None):
            if batch == warmup - 1:
                self.started = time.perf_counter()

        def on_train_end(self, logs=None):
            self.seconds = time.perf_counter() - self.started

    return Clock()


def _start(mode: str, strategy) -> tuple:
    """(rank, size) of this process."""
    if mode == "horovod":
        import horovod.tensorflow.keras as hvd

        hvd.init()
        return hvd.rank(), hvd.size()
    if mode == "mwms":
        task = json.loads(os.environ["TF_CONFIG"])["task"]
        return task["index"], strategy.num_replicas_in_sync
    return 0, 1


def launch_workers(argv: Sequence[str]) -> int:
    """Start ``RANKS`` MWMS workers on this host, each with its ``TF_CONFIG`` (free loopback ports), and wait."""
    ports = []
    for _ in range(RANKS):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    workers = [f"127.0.0.1:{port}" for port in ports]
    procs = [subprocess.Popen([sys.executable, "-m", "bench._keras_body", *argv],
                              env={**os.environ, "TF_CONFIG": json.dumps({"cluster": {"worker": workers},
                                                                          "task": {"type": "worker", "index": i}})})
             for i in range(RANKS)]
    codes = [proc.wait() for proc in procs]
    return max(codes, key=abs)


def main() -> None:
    from bench._body_cli import run

    if "--mode" in sys.argv and sys.argv[sys.argv.index("--mode") + 1:][:1] == ["mwms"] and "TF_CONFIG" not in os.environ:
        sys.exit(launch_workers(sys.argv[1:]))
    run(__doc__.split("\n\n")[0], ["horovod", "mwms", "single"], train)


if __name__ == "__main__":
    main()
