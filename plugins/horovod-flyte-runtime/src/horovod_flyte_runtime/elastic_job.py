"""What an elastic Horovod job (``HorovodJob``, in both SDKs' plugins) must be: Gloo, a framework with an elastic
API, and worker bounds around the count it starts with.

No flytekit import: the Flyte 2 plugin uses this module.
"""

from typing import Optional, Tuple

from .settings import Horovod, HorovodConfigError


def check_elastic_job(horovod: Horovod, workers: Optional[int], min_workers: Optional[int],
                      max_workers: Optional[int]) -> Tuple[int, int]:
    """The job's worker bounds ``(min_workers, max_workers)``, an unset one ``workers``; ``HorovodConfigError`` unless
    ``horovod`` runs on Gloo with a framework that has ``hvd.elastic``, ``workers`` is set, and the bounds hold it."""
    if horovod.controller != "gloo":
        raise HorovodConfigError("HorovodJob: elastic Horovod runs on Gloo only; use Horovod(controller='gloo')")
    if horovod.framework == "mxnet":  # horovod.mxnet has no elastic module (0.28.1: TF, Keras, PyTorch)
        raise HorovodConfigError("HorovodJob: Horovod has no elastic API for MXNet (horovod.mxnet has no "
                                 "hvd.elastic); use MPIJob for a fixed-size MXNet job")
    if workers is None:
        raise HorovodConfigError("HorovodJob needs worker=Worker(replicas=N): the number of worker pods")
    low = workers if min_workers is None else min_workers
    high = workers if max_workers is None else max_workers
    if not low <= workers <= high:
        raise HorovodConfigError(f"HorovodJob needs min_workers <= worker.replicas <= max_workers, got "
                                 f"{low} <= {workers} <= {high}")
    return low, high
