"""``hvd.init()`` once per rank, the plugin's: a body finds Horovod initialised (for the Horovod module it imports) and
needs no init of its own, and one that still calls ``hvd.init()`` (a library written for ``horovodrun``) is harmless."""

import pytest

from flytekitplugins.horovod import Horovod
from horovod_flyte_runtime.local_launcher import run_local


def _torch_body():
    import horovod.torch as hvd
    import torch

    initialised_before = hvd.is_initialized()
    hvd.init()  # a second init, as a library's body may run
    return initialised_before, hvd.size(), hvd.allreduce(torch.tensor(float(hvd.rank() + 1)), op=hvd.Sum).item()


def _keras_body():
    import horovod.tensorflow.keras as hvd  # as the Rossmann model's body; the plugin inits horovod.tensorflow
    import tensorflow as tf

    initialised_before = hvd.is_initialized()
    hvd.init()
    return initialised_before, hvd.size(), float(hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum))


@pytest.mark.parametrize("controller", ["gloo", pytest.param("mpi", marks=pytest.mark.slow)])
def test_the_body_finds_horovod_initialised_and_a_second_init_is_harmless(controller):
    results = run_local(_torch_body, num_proc=2, settings=Horovod(framework="pytorch", controller=controller),
                        all_ranks=True)
    assert [r.value for r in results] == [(True, 2, 3.0), (True, 2, 3.0)]


@pytest.mark.slow
def test_a_keras_body_finds_horovod_initialised_by_the_tensorflow_framework():
    results = run_local(_keras_body, num_proc=2, settings=Horovod(framework="tensorflow", controller="mpi"),
                        all_ranks=True)
    assert [r.value for r in results] == [(True, 2, 3.0), (True, 2, 3.0)]
