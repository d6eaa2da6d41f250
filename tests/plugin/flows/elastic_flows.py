"""An elastic HorovodJob, as Horovod's elastic Keras example writes it: ``hvd.elastic.run`` with a ``KerasState``
committed every epoch. With ``kill_at_epoch`` set, the worker that is rank 2 of 3 is killed (SIGKILL, as by the OOM
killer) when it starts that epoch; the job must go on with 2 workers and finish."""

import typing

from flytekit import task, workflow

from flytekitplugins.horovod import HorovodJob, Worker

Trained = typing.NamedTuple("Trained", [("size", int), ("epochs", int), ("sizes_seen", typing.List[int]),
                                        ("loss", float)])


@task(task_config=HorovodJob(worker=Worker(replicas=3), min_workers=2, max_workers=3, elastic_timeout=120))
def train_elastic(epochs: int, kill_at_epoch: int) -> Trained:
    import os
    import signal

    import horovod.tensorflow.keras as hvd
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2048, 4)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5], [3.0]], dtype="float32") + 1.0
    model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(1)])
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.05))
    model.compile(optimizer=optimizer, loss="mse")
    sizes = []

    class KillOnce(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            sizes.append(hvd.size())
            if epoch == kill_at_epoch and hvd.size() == 3 and hvd.rank() == 2:
                os.kill(os.getpid(), signal.SIGKILL)

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    callbacks = [hvd.elastic.CommitStateCallback(state), hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state), KillOnce()]

    @hvd.elastic.run
    def fit(state):
        shard = slice(hvd.rank(), None, hvd.size())
        return model.fit(x[shard], y[shard], batch_size=64, epochs=epochs, initial_epoch=state.epoch,
                         callbacks=callbacks, verbose=0)

    history = fit(state)
    return Trained(hvd.size(), state.epoch, sizes, float(history.history["loss"][-1]))


@workflow
def elastic_wf(epochs: int = 6, kill_at_epoch: int = -1) -> Trained:
    return train_elastic(epochs=epochs, kill_at_epoch=kill_at_epoch)
