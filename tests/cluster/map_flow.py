"""A ``map_task`` over an ``MPIJob`` task, for ``test_map_task``: serialized in-process, then its launcher command run
as propeller runs one element of the ArrayNode."""

import json
import os
import typing

from flytekit import map_task, task, workflow

from flytekitplugins.horovod import Horovod, HorovodJob, MPIJob, Worker


@task(task_config=MPIJob(worker=Worker(replicas=1), slots=2, horovod=Horovod(framework="pytorch")))
def scaled_sum(x: float) -> float:
    """Rank r contributes ``x * (r + 1)`` of the element IT read: 3x on 2 ranks only if both read the same element."""
    import horovod.torch as hvd
    import torch

    marker_dir = os.environ.get("MAP_FLOW_MARKERS")
    if marker_dir:
        os.makedirs(marker_dir, exist_ok=True)
        with open(os.path.join(marker_dir, f"rank-{hvd.rank()}.json"), "w") as f:
            json.dump({"x": x, "index": os.environ.get("FLYTE_K8S_ARRAY_INDEX")}, f)
    return float(hvd.allreduce(torch.tensor(x * (hvd.rank() + 1)), op=hvd.Sum))


@workflow
def map_wf(xs: typing.List[float]) -> typing.List[float]:
    return map_task(scaled_sum)(x=xs)


@task(task_config=HorovodJob(worker=Worker(replicas=2), min_workers=1, horovod=Horovod(framework="pytorch")))
def elastic_sum(x: float) -> float:
    """Elastic: serialized only (each element kfmpi's elastic horovodrun around ``pyflyte-map-execute``)."""
    return x


@workflow
def elastic_map_wf(xs: typing.List[float]) -> typing.List[float]:
    return map_task(elastic_sum)(x=xs)
