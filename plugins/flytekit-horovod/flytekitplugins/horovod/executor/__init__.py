"""What a Horovod rank or a Spark executor runs: no module here imports flytekit at the top, so a rank and a Spark
barrier task work where flytekit is not installed (tests/plugin/test_no_flytekit.py). ``spark_launcher`` ships this
package by value to Spark executors; the task plugins and launchers one level up import from here, never the reverse
at the top (``failures`` and ``settings`` reach up lazily, on the launcher's side only).

Importing it sets one thing: ``TF_USE_LEGACY_KERAS=1`` where tf-keras is installed and the variable is unset
(``frameworks.prefer_legacy_keras``), so that ``tf.keras`` is the Keras 2 Horovod's Keras API needs in the task's
process, in every rank and in every Spark worker, before any of them imports TensorFlow; and an import hook that loads
triton's ``libtriton.so`` with ``RTLD_DEEPBIND`` where TensorFlow is already imported (``triton_llvm``), so that
torch's first optimizer no longer aborts such a process on two copies of LLVM."""

from .frameworks import prefer_legacy_keras
from .triton_llvm import isolate_triton_llvm

prefer_legacy_keras()
isolate_triton_llvm()
