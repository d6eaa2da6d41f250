"""Keras bodies on the MPI route, loaded by path with ``pyflyte run``: a ``tf.keras`` fit through Horovod's
``DistributedOptimizer`` on 2 ranks (Gloo and mpirun), and the same optimizer given a Keras 3 one, which must be
refused rather than train without averaging (Horovod's Keras API needs Keras 2: ``tf.keras`` is tf-keras there)."""

import sys
import typing

from flytekit import task, workflow

from flytekitplugins.horovod import Horovod, MPIJob, Worker

Fit = typing.NamedTuple("Fit", [("size", int), ("keras", str), ("weights_equal", bool), ("loss_fell", bool)])


def _fit() -> Fit:
    """Each rank starts from its own random weights and fits its own data; the broadcast makes the start equal and the
    averaged gradients keep every step equal, so the ranks end with identical weights only if Horovod averaged."""
    import horovod.tensorflow.keras as hvd
    import numpy as np
    import tensorflow as tf

    tf.random.set_seed(hvd.rank())
    model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(4, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    model.compile(optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.Adam(0.05)), loss="mse")
    rng = np.random.default_rng(hvd.rank())
    x = rng.normal(size=(64, 3)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5]], dtype="float32") + hvd.rank()
    history = model.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0), hvd.callbacks.MetricAverageCallback()])
    flat = tf.concat([tf.reshape(w, [-1]) for w in model.get_weights()], 0)
    gathered = hvd.allgather(tf.reshape(flat, [1, -1])).numpy()
    losses = history.history["loss"]
    package = sys.modules[type(model).__module__.split(".")[0]]  # keras 2.15 on TF 2.15, tf_keras on TF >= 2.16
    return Fit(hvd.size(), f"{package.__name__} {package.__version__}", bool(np.allclose(gathered[0], gathered[1])),
               bool(losses[-1] < losses[0]))


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(framework="tensorflow")))
def keras_gloo() -> Fit:
    return _fit()


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(framework="tensorflow", controller="mpi")))
def keras_mpirun() -> Fit:
    return _fit()


@workflow
def keras_gloo_wf() -> Fit:
    return keras_gloo()


@workflow
def keras_mpirun_wf() -> Fit:
    return keras_mpirun()


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(framework="tensorflow")))
def keras3_optimizer() -> str:
    """Horovod's DistributedOptimizer given a Keras 3 optimizer (``import keras`` where Keras 3 is installed)."""
    import horovod.tensorflow.keras as hvd
    import keras

    optimizer = hvd.DistributedOptimizer(keras.optimizers.Adam(0.01))
    return f"wrapped a Keras {keras.__version__} optimizer: {type(optimizer).__name__}"


@workflow
def keras3_optimizer_wf() -> str:
    return keras3_optimizer()
