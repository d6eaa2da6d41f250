"""A Flyte 2 task's error document (``<outputs path>/error.pb``), written as Flyte 2's ``a0`` writes one
(flyte 2.12.1 ``_internal/runtime/io.py``, ``upload_error``): by a rank's watch and by the cluster launcher, which
``a0`` itself never reaches. The Flyte 2 backend reads it when the MPIJob succeeded (flyteorg/flyte 6fadb90,
``executor/pkg/plugin/k8s/plugin_manager.go``, ``checkResourcePhase``), as flytepropeller does.

No flytekit import; flyte's, lazily.
"""

import asyncio
import threading

from .errors import RankFailedError
from .failures import this_host


def write_flyte2_error(outputs_path: str, error: BaseException) -> None:
    """Upload ``error`` as the task's error: a user error whose code is its class name; not retried for a
    ``RankFailedError`` (a body that raised, ranks out of step: the same on every attempt), retried otherwise."""
    from flyte._internal.runtime.io import upload_error
    from flyteidl2.core import execution_pb2

    err = execution_pb2.ExecutionError(kind=execution_pb2.ExecutionError.USER, code=type(error).__name__,
                                       message=str(error), worker=this_host())
    failed: list = []

    def upload() -> None:  # its own thread and event loop: callers may be inside a running loop
        try:
            asyncio.run(upload_error(err, outputs_path, recoverable=not isinstance(error, RankFailedError)))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=upload, name="flyte2-error")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
