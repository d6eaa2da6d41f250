"""How flytepropeller v1.16.8 reads the protos we register (``tests/cluster/propeller.py`` transcribes its Go source,
flyteorg/flyte 51877f89: ``flyteplugins/go/tasks/plugins/k8s/kfoperators/mpi/mpi.go``,
``.../kfoperators/common/common_operator.go``, ``flyteplugins/go/tasks/plugins/k8s/spark/spark.go``).

A change of ours that propeller would read differently fails here: a task type version other than 1, a custom field
propeller's proto does not know (jsonpb drops it silently), a launcher command that no longer gives the workers the
task's slots (propeller gives every MPIJob ``slotsPerWorker: 1``), a Spark conf that does not reach the application.
"""

import copy
from collections import OrderedDict

import pytest
from flyteidl.core import tasks_pb2
from flyteidl.plugins import spark_pb2
from flyteidl.plugins.kubeflow import mpi_pb2 as kubeflow_mpi
from flytekit import task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from google.protobuf import struct_pb2

from flytekitplugins.horovod import CleanPodPolicy, Horovod, HorovodJob, Launcher, MPIJob, RunPolicy, Worker
from tests.cluster.contract import CLUSTER_LAUNCHER
from tests.cluster.propeller import BadTaskSpecification, mpi_job, spark_application, unknown_fields
from tests.cluster.registration import custom

SETTINGS = SerializationSettings(image_config=ImageConfig.auto_default_image(), project="p", domain="d", version="v")


def _templates(registrations, task_type: str):
    found = [t for reg in registrations for t in reg.tasks.values() if t.type == task_type]
    assert found, f"no {task_type} task registered"
    return found


def _serialized(config) -> tasks_pb2.TaskTemplate:
    """The task template ``pyflyte package`` writes for a task with ``config`` (flytekit's own translator)."""
    def body(x: int) -> int:
        return x

    return get_serializable(OrderedDict(), SETTINGS, task(task_config=config)(body)).template.to_flyte_idl()


# ---------------------------------------------------------------- mpi.go
def test_propeller_gives_every_mpi_task_one_slot_per_worker_and_its_launcher_gives_the_task_s_slots(
        flows_registration, rossmann):
    for template in _templates([flows_registration, rossmann], "mpi"):
        where, spec = template.id.name, custom(template)
        assert template.task_type_version == 1, where  # kfmpi's version: the kubeflow DistributedMPITrainingTask
        assert unknown_fields(template, kubeflow_mpi.DistributedMPITrainingTask()) == set(), where
        job = mpi_job(template)
        slots = int(spec["slots"])
        assert (job.slots_per_worker, job.launcher_replicas) == (1, 1), where  # whatever the task's slots
        assert job.worker_replicas == int(spec["workerReplicas"]["replicas"]), where
        assert job.launcher_args is None and job.worker_args is None, where  # the task's command runs
        args = list(template.container.args)
        assert args[:len(CLUSTER_LAUNCHER) + 2] == CLUSTER_LAUNCHER + [str(slots), "--"], (where, args[:6])
        if "--min-np" not in args:  # a fixed-size launch asks for every slot of every worker
            assert args[args.index("-np") + 1] == str(job.worker_replicas * slots), (where, args)


def test_slots_reach_the_mpijob_only_with_task_type_version_0():
    template = _serialized(MPIJob(worker=Worker(replicas=2), slots=4))
    assert mpi_job(template).slots_per_worker == 1
    old = copy.deepcopy(template)
    old.task_type_version = 0
    old.custom.Clear()
    old.custom.update({"numWorkers": 2, "numLauncherReplicas": 0, "slots": 4})
    assert (mpi_job(old).slots_per_worker, mpi_job(old).launcher_replicas, mpi_job(old).worker_replicas) == (4, 1, 2)
    template.task_type_version = 2
    with pytest.raises(BadTaskSpecification, match="unsupported task template version"):
        mpi_job(template)


def test_launcher_replicas_are_always_1_and_the_run_policy_is_read():
    config = MPIJob(worker=Worker(replicas=3), launcher=Launcher(replicas=2), slots=2,
                    run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.ALL, active_deadline_seconds=600,
                                         backoff_limit=2, ttl_seconds_after_finished=60))
    template = _serialized(config)
    assert custom(template)["launcherReplicas"]["replicas"] == 2  # registered as given, then ignored
    job = mpi_job(template)
    assert (job.launcher_replicas, job.worker_replicas, job.slots_per_worker) == (1, 3, 1)
    assert job.run_policy == {"cleanPodPolicy": "All", "activeDeadlineSeconds": 600, "backoffLimit": 2,
                              "ttlSecondsAfterFinished": 60}
    # no run policy: propeller leaves it empty (the training-operator then keeps the pods: clean pod policy None);
    # a run policy without a clean pod policy is read as CLEANPOD_POLICY_NONE, the proto's zero value
    assert mpi_job(_serialized(MPIJob(worker=Worker(replicas=2)))).run_policy == {}
    partial = _serialized(MPIJob(worker=Worker(replicas=2), run_policy=RunPolicy(active_deadline_seconds=60)))
    assert mpi_job(partial).run_policy == {"cleanPodPolicy": "None", "activeDeadlineSeconds": 60}


def test_an_elastic_job_s_workers_are_worker_replicas_whatever_max_workers():
    template = _serialized(HorovodJob(worker=Worker(replicas=2), slots=2, min_workers=1, max_workers=4))
    assert (mpi_job(template).worker_replicas, mpi_job(template).slots_per_worker) == (2, 1)
    args = list(template.container.args)
    assert args[args.index("--max-np") + 1] == "8"  # Horovod may grow to 8 ranks, the MPIJob has 2 pods x 2 slots


def test_a_worker_command_replaces_the_worker_args_and_a_launcher_command_is_refused_with_slots():
    template = _serialized(MPIJob(worker=Worker(replicas=2, command=["sleep", "infinity"])))
    assert mpi_job(template).worker_args == ["sleep", "infinity"]
    with pytest.raises(ValueError, match=r"slots=2 with launcher=Launcher\(command=...\): the Flyte backend's mpi plugin .* never "
                                         r"passes slots"):
        _serialized(MPIJob(worker=Worker(replicas=2), slots=2, launcher=Launcher(command=["mpirun", "x"])))
    assert mpi_job(_serialized(MPIJob(worker=Worker(replicas=2), launcher=Launcher(command=["x"])))).launcher_args \
        == ["x"]


def test_a_custom_field_propeller_does_not_know_is_seen():
    template = _serialized(MPIJob(worker=Worker(replicas=2), horovod=Horovod(controller="mpi")))
    template.custom.update({"horovod": {"controller": "mpi"}})
    assert unknown_fields(template, kubeflow_mpi.DistributedMPITrainingTask()) == {"horovod"}


# ---------------------------------------------------------------- spark.go
def test_every_spark_task_we_register_becomes_the_spark_application_we_test(flows_registration, rossmann):
    for template in _templates([flows_registration, rossmann], "spark"):
        where, spec = template.id.name, custom(template)
        assert unknown_fields(template, spark_pb2.SparkJob()) == set(), where
        # the Databricks fields are for Flyte's Databricks connector; the spark plugin does not read them
        assert not any(spec.get(k) for k in ("databricksConf", "databricksToken", "databricksInstance")), where
        app = spark_application(template)
        assert app.type == "Python" and app.main_class is None, where
        assert app.main_application_file == spec["mainApplicationFile"], where
        assert app.arguments == list(template.container.args) and app.arguments[0] == "pyflyte-execute", where
        assert app.spark_conf["spark.pyspark.python"] == app.spark_conf["spark.pyspark.driver.python"] \
            == spec["executorPath"], where
        for key, value in spec.get("sparkConf", {}).items():
            assert app.spark_conf[key] == value, (where, key)
        assert app.batch_scheduler is None, where


def test_spark_defaults_yield_to_the_task_s_conf_and_the_batch_scheduler_is_read(flows_registration):
    template = copy.deepcopy(flows_registration.task("tests.cluster.flows.cluster_flows.spark_allreduce"))
    conf = template.custom.fields["sparkConf"].struct_value
    conf.fields["spark.batchScheduler"].CopyFrom(struct_pb2.Value(string_value="volcano"))
    conf.fields["spark.executor.cores"].CopyFrom(struct_pb2.Value(string_value="2"))
    app = spark_application(template, default_conf={"spark.sql.shuffle.partitions": "100", "spark.ui.enabled": "false"})
    assert app.batch_scheduler == "volcano"
    assert app.spark_conf["spark.sql.shuffle.partitions"] == "4" and app.spark_conf["spark.ui.enabled"] == "false"
    assert app.executor_cores == 2 and app.spark_conf["spark.kubernetes.executor.limit.cores"] == "2"
