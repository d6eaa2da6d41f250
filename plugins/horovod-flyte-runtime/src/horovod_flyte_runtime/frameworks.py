"""The deep-learning frameworks ``Horovod(framework=...)`` names, and how Horovod builds and initialises each (data
only: ``settings`` and ``build_info`` both read it)."""

import importlib.util
import os
from dataclasses import dataclass
from typing import Dict, MutableMapping

LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"


@dataclass(frozen=True)
class FrameworkBuild:
    """How one ``Horovod(framework=...)`` value is built and checked."""

    display: str  # the framework's name as Horovod's documentation spells it
    module: str  # the Horovod module whose init() a rank runs before the task body
    package: str  # the framework's own top-level package
    extension: str  # Horovod's compiled extension for it, relative to the horovod package
    build_flag: str  # the build variable that makes Horovod build it (or fail the build saying why)
    allreduce: str  # a 1-rank allreduce of the value 1 that prints it, with the framework's Horovod module as hvd


_TF_ALLREDUCE = "import tensorflow as tf; print(float(hvd.allreduce(tf.constant(1.0))))"
FRAMEWORK_BUILDS: Dict[str, FrameworkBuild] = {
    "tensorflow": FrameworkBuild("TensorFlow", "horovod.tensorflow", "tensorflow", "tensorflow/mpi_lib",
                                 "HOROVOD_WITH_TENSORFLOW", _TF_ALLREDUCE),
    "keras": FrameworkBuild("TensorFlow (Keras)", "horovod.keras", "keras", "tensorflow/mpi_lib",
                            "HOROVOD_WITH_TENSORFLOW", _TF_ALLREDUCE),
    "pytorch": FrameworkBuild("PyTorch", "horovod.torch", "torch", "torch/mpi_lib_v2", "HOROVOD_WITH_PYTORCH",
                              "import torch; print(float(hvd.allreduce(torch.tensor(1.0))))"),
    "mxnet": FrameworkBuild("MXNet", "horovod.mxnet", "mxnet", "mxnet/mpi_lib", "HOROVOD_WITH_MXNET",
                            "import mxnet as mx; print(float(hvd.allreduce(mx.nd.array([1.0])).asscalar()))"),
}


def prefer_legacy_keras(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Make ``tf.keras`` Keras 2 (tf-keras) in this process and every process it starts, where tf-keras is installed
    and the user has not set ``TF_USE_LEGACY_KERAS`` either way. Horovod's Keras API needs Keras 2; on TensorFlow >=
    2.16 ``tf.keras`` is Keras 3 unless this variable is set before TensorFlow is imported. Returns whether it set it."""
    if LEGACY_KERAS_ENV in environ or importlib.util.find_spec("tf_keras") is None:
        return False
    environ[LEGACY_KERAS_ENV] = "1"
    return True
