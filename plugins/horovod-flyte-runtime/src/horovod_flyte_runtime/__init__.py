"""The Horovod runtime under both Flyte plugins (``flytekitplugins.horovod`` for flytekit, ``flyteplugins.horovod``
for the ``flyte`` SDK): what launches a job's ranks, passes them its settings, watches them, names the one that failed
and returns rank 0's result, and what a rank or a Spark executor runs. No module here imports either SDK at the top,
so a rank and a Spark barrier task work where neither is installed (tests/plugin/test_no_flytekit.py);
``spark_launcher`` ships this package by value to Spark executors. The plugins import from here, never the reverse.
What must run inside a rank for one SDK (flytekit's context, entrypoints and checkpoints, Flyte 2's error document) is
imported lazily, only where that SDK is the one running the task.

Importing it sets one thing: ``TF_USE_LEGACY_KERAS=1`` where tf-keras is installed and the variable is unset
(``frameworks.prefer_legacy_keras``), so that ``tf.keras`` is the Keras 2 Horovod's Keras API needs in the task's
process, in every rank and in every Spark worker, before any of them imports TensorFlow; and an import hook that loads
triton's ``libtriton.so`` with ``RTLD_DEEPBIND`` where TensorFlow is already imported (``triton_llvm``), so that
torch's first optimizer no longer aborts such a process on two copies of LLVM."""

from .frameworks import prefer_legacy_keras
from .triton_llvm import isolate_triton_llvm

prefer_legacy_keras()
isolate_triton_llvm()
