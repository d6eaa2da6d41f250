"""The private flytekit and pyspark internals this plugin relies on, in one place.

Each is used because no public API gives the same thing; tests/plugin/test_shims.py fails loudly (naming the
upgrade that changed it) when an upgrade of flytekit or pyspark removes or changes one.
"""

import os
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


def write_error_document(ctx: Any, error: BaseException) -> None:
    """Upload ``error`` as the task's error document, exactly as pyflyte-execute does when a task raises it.

    For rank 0 of a launched world when its main thread is stuck in a collective that will never return (a lost
    peer), so pyflyte-execute never gets to write it; ``ctx`` is the task's FlyteContext, captured in that thread.
    """
    from flytekit.bin import entrypoint
    from flytekit.core import utils
    from flytekit.exceptions.user import FlyteRecoverableException, FlyteUserRuntimeException
    from flytekit.models.core import errors, execution

    from .errors import RankLostError

    wrapped = FlyteUserRuntimeException(error)
    wrapped.__cause__ = error  # as `raise ... from` in flytekit's dispatch: the trace shows the error itself
    # a lost rank is retried whichever layer raised it: the v1 plugin's own subclass is a FlyteRecoverableException,
    # and the cluster launcher (which imports no plugin) raises the runtime's
    recoverable = isinstance(error, (FlyteRecoverableException, RankLostError))
    document = errors.ErrorDocument(errors.ContainerError(
        code=wrapped.error_code,
        message=entrypoint.get_traceback_str(wrapped),
        kind=errors.ContainerError.Kind.RECOVERABLE if recoverable else errors.ContainerError.Kind.NON_RECOVERABLE,
        origin=execution.ExecutionError.ErrorKind.USER,
        timestamp=entrypoint.get_container_error_timestamp(error),
        worker=entrypoint._get_worker_name(),
    ))
    engine_dir = ctx.execution_state.engine_dir
    utils.write_proto_to_file(document.to_flyte_idl(), os.path.join(engine_dir, entrypoint._build_error_file_name()))
    ctx.file_access.put_data(engine_dir, ctx.user_space_params.output_metadata_prefix, is_multipart=True)
