"""What the Flyte 2 backend reads from a Horovod task's template, transcribed from flyteorg/flyte's ``main`` (the
Flyte 2 backend, tag v2.0.43, commit 6fadb90d65af26f4db908ec1c5f5af546a3e4299), whose executor/plugins/loader.go
loads flyteplugins/go/tasks/plugins/k8s/kfoperators/mpi/mpi.go (``BuildResource``): task type ``mpi``; for
``TaskTypeVersion == 1`` the custom unmarshals into flyteidl2's kubeflow ``DistributedMPITrainingTask`` and it reads
``launcherReplicas`` (image, resources, command, restartPolicy), ``workerReplicas`` (the same, and ``replicas``:
"number of workers must be greater than 0" otherwise) and ``runPolicy``; a replica spec's ``common`` is read first
where set, else the top-level fields flyteidl2 marks deprecated, which this plugin writes as kfmpi does
(kfoperators/common/common_operator.go, ``ToReplicaSpecWithOverrides``);
``slots`` is read only for version 0 (SlotsPerWorker stays 1), so it is serialized but the launcher must restore it.
"""

import pytest

pytest.importorskip("flyteplugins.horovod", reason="flyteplugins-horovod (and the flyte SDK) is not installed here")

from flyteplugins.horovod import Horovod, HorovodConfigError, HorovodJob, MPIJob, RunPolicy, Worker  # noqa: E402
from flyteplugins.horovod.task import HorovodMPITask, Launcher  # noqa: E402


def _task(config: MPIJob) -> HorovodMPITask:
    def body(x: float) -> float:
        return x

    import flyte

    env = flyte.TaskEnvironment(name="hvd_serialization", plugin_config=config)
    return env.task(body)


def test_task_type_and_version_are_the_ones_mpi_go_handles():
    task = _task(MPIJob(worker=Worker(replicas=2)))
    assert (task.task_type, task.task_type_version) == ("mpi", 1)


def test_custom_has_the_fields_mpi_go_reads_for_version_1():
    task = _task(MPIJob(worker=Worker(replicas=3, image="hvd:1", command=["sh"], restart_policy="failure"),
                        launcher=Launcher(image="launcher:1"), slots=2,
                        run_policy=RunPolicy(clean_pod_policy="all", backoff_limit=4)))
    custom = task.custom_config(None)
    assert custom == {
        "workerReplicas": {"replicas": 3, "image": "hvd:1", "command": ["sh"],
                           "restartPolicy": "RESTART_POLICY_ON_FAILURE"},
        "launcherReplicas": {"replicas": 1, "image": "launcher:1"},  # launcher.replicas defaults to 1, as in v1
        "runPolicy": {"cleanPodPolicy": "CLEANPOD_POLICY_ALL", "backoffLimit": 4},
        "slots": 2,
    }


def test_an_elastic_horovod_job_is_an_mpi_task_with_the_same_custom():
    """kfmpi's ``HorovodJob`` task is an ``MPIFunctionTask`` (task type ``mpi``): so is the Flyte 2 one."""
    elastic = _task(HorovodJob(worker=Worker(replicas=3), min_workers=2, max_workers=4))
    fixed = _task(MPIJob(worker=Worker(replicas=3)))
    assert (elastic.task_type, elastic.task_type_version) == ("mpi", 1)
    assert elastic.custom_config(None) == fixed.custom_config(None)


@pytest.mark.parametrize("kwargs, message", [
    ({"worker": Worker(replicas=2), "horovod": Horovod(controller="mpi")}, "elastic Horovod runs on Gloo only"),
    ({"worker": Worker(replicas=2), "horovod": Horovod(framework="mxnet")}, "no elastic API for MXNet"),
    ({"worker": Worker(replicas=2), "min_workers": 3}, "min_workers <= worker.replicas <= max_workers, got 3 <= 2 <= 2"),
    ({"worker": Worker(replicas=2), "max_workers": 0}, "max_workers=0: must be a whole number, at least 1"),
    ({}, "HorovodJob needs worker=Worker(replicas=N)"),
], ids=["mpi controller", "mxnet", "min above replicas", "max zero", "no workers"])
def test_an_elastic_job_that_cannot_run_is_refused_when_made(kwargs, message):
    with pytest.raises(HorovodConfigError) as refused:
        HorovodJob(**kwargs)
    assert message in str(refused.value)
