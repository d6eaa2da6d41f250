"""The private flytekit and pyspark internals this plugin relies on, in one place.

Each is used because no public API gives the same thing; tests/plugin/test_shims.py fails loudly (naming the
upgrade that changed it) when an upgrade of flytekit or pyspark removes or changes one.
"""

from typing import Any, Optional, Tuple


def checkpoint_paths(checkpoint: Any) -> Tuple[Optional[str], Optional[str]]:
    """A flytekit ``SyncCheckpoint``'s destination and previous-attempt source (kfpytorch reads them the same way)."""
    return checkpoint._checkpoint_dest, checkpoint._checkpoint_src


def keep_attrs_across_dispatch(incoming: Any, built: Any) -> None:
    """Copy the attributes ``pre_execute`` added (``built``) onto the parameters flytekit passed in (``incoming``).

    flytekit's ``dispatch_execute`` rebuilds the execution parameters from the incoming ones when ``enable_deck`` is
    on, dropping what ``pre_execute`` added (the SparkSession too).
    """
    incoming._attrs.update(built._attrs)


def executor_count(spark_context: Any) -> int:
    """Executors registered with a (non-local) SparkContext; pyspark has no public call for it."""
    return spark_context._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver is counted too
