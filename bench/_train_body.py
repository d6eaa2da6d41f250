"""What bench/train_scale.py runs in every Horovod rank (``hvd.init()`` has already run there)."""

from __future__ import annotations

import time


def train_throughput(prepared_dir: str, hidden: list, batch_size: int, warmup: int, steps: int,
                     max_rows: int = 200_000) -> dict:
    """Train the Rossmann model (Horovod DistributedOptimizer) for ``warmup + steps`` steps of ``batch_size``
    rows per rank; return the samples per second (all ranks together) over the last ``steps`` steps."""
    import horovod.tensorflow.keras as hvd
    import numpy as np
    import tensorflow as tf

    from rossmann.model import build_model, compile_model, make_optimizer
    from rossmann.prepared import continuous_stats, feature_cols, load_metadata, model_inputs, read_split

    rank, size = hvd.rank(), hvd.size()
    metadata = load_metadata(prepared_dir)
    label = metadata["label_col"]
    train = read_split(f"{prepared_dir}/train", feature_cols(metadata) + [label], shard=(rank, size))
    train = train.iloc[:max_rows]
    data = (tf.data.Dataset.from_tensor_slices((model_inputs(train, metadata), train[label].to_numpy(np.float32)))
            .shuffle(min(len(train), 100_000), seed=rank).repeat().batch(batch_size).prefetch(tf.data.AUTOTUNE))
    tf.keras.utils.set_random_seed(0)
    model = build_model(metadata, continuous_stats(prepared_dir, metadata), hidden)
    compile_model(model, hvd.DistributedOptimizer(make_optimizer(1e-3 * size)))

    class Clock(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch + 1 == warmup:
                self.start = time.perf_counter()

        def on_train_end(self, logs=None):
            self.seconds = time.perf_counter() - self.start

    clock = Clock()
    model.fit(data, steps_per_epoch=warmup + steps, epochs=1, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), clock])
    return {"samples_per_second": steps * batch_size * size / clock.seconds, "seconds": clock.seconds,
            "ranks": size, "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads()}


def allreduce_bandwidth(sizes_mb: list, reps: int) -> dict:
    """Median seconds of ``hvd.allreduce`` (sum) of a float32 tensor of each size, and of a plain memory
    copy of the same size in this process (the ceiling: an allreduce moves at least that many bytes)."""
    import horovod.tensorflow as hvd
    import numpy as np
    import tensorflow as tf

    out = {}
    for mb in sizes_mb:
        n = int(mb * 1024 * 1024 // 4)
        tensor = tf.ones([n], dtype=tf.float32)
        hvd.allreduce(tensor, op=hvd.Sum, name=f"warmup_{mb}")
        times = []
        for i in range(reps):
            start = time.perf_counter()
            hvd.allreduce(tensor, op=hvd.Sum, name=f"bench_{mb}")
            times.append(time.perf_counter() - start)
        src, dst = np.ones(n, dtype=np.float32), np.empty(n, dtype=np.float32)
        np.copyto(dst, src)
        copies = []
        for _ in range(reps):
            start = time.perf_counter()
            np.copyto(dst, src)
            copies.append(time.perf_counter() - start)
        out[str(mb)] = {"allreduce_seconds": times, "copy_seconds": copies}
    return {"rank": hvd.rank(), "size": hvd.size(), "results": out}
