"""TensorBoard without TensorFlow in the ranks of Horovod's ``TorchEstimator``: its trainer
(``horovod/spark/torch/remote.py``) imports ``torch.utils.tensorboard``, and TensorBoard then loads all of TensorFlow
where it is installed, into a PyTorch process. Those ranks write their TensorBoard logs to a local folder that the
Estimator's Store copies, which TensorBoard's own TensorFlow stub writes as TensorFlow would. A user's own PyTorch body
keeps TensorBoard as it is: it may log to ``gs://``, which only TensorFlow's file system writes."""

import sys
import types
from typing import Any, Callable

from .body_framework import body_function

NO_TENSORFLOW = "tensorboard.compat.notf"  # TensorBoard's own switch (its //tensorboard/compat:no_tensorflow target)
TORCH_ESTIMATOR_TRAINER = "horovod.spark.torch.remote"  # the module of the function the TorchEstimator runs


def is_torch_estimator_trainer(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` (through ``functools.partial``, as the Estimator's backend gets it) is the TorchEstimator's
    training function."""
    return getattr(body_function(fn), "__module__", None) == TORCH_ESTIMATOR_TRAINER


def tensorboard_without_tensorflow() -> None:
    """Make TensorBoard use its TensorFlow stub in this process, unless TensorFlow is already imported (TensorBoard
    then uses it, as it would)."""
    if "tensorflow" not in sys.modules:
        sys.modules.setdefault(NO_TENSORFLOW, types.ModuleType(NO_TENSORFLOW))
