"""What flytepropeller builds from a registered task template, transcribed from its Go source at one commit.

flyteorg/flyte v1.16.8, commit 51877f899c9f95e0cb5efe90444eb0c6c6ea48a9:

- ``flyteplugins/go/tasks/plugins/k8s/kfoperators/mpi/mpi.go``, ``BuildResource``: the kubeflow.org/v1 ``MPIJobSpec``
  of an ``mpi`` task. Task type version 0 reads the old ``flyteidl.plugins.DistributedMPITrainingTask``
  (``num_workers``, ``num_launcher_replicas``, ``slots``); version 1 (kfmpi's and ours) reads the kubeflow
  ``DistributedMPITrainingTask`` but never its ``slots``: ``SlotsPerWorker`` stays at its initial 1;
- ``.../kfoperators/common/common_operator.go``: ``ToReplicaSpecWithOverrides`` (replicas from ``common`` when set,
  else the deprecated ``replicas``; the launcher is forced to 1 replica; a replica ``command`` replaces the container
  args) and ``ParseRunPolicy`` (zero values are left unset; the clean pod policy is always set);
- ``flyteplugins/go/tasks/plugins/k8s/spark/spark.go``, ``BuildResource``: the ``SparkApplicationSpec`` of a ``spark``
  task (``getSparkConfig``, ``createSparkApplication``, driver/executor sizes from the Spark conf);
- ``flyteplugins/go/tasks/pluginmachinery/flytek8s/pod_helper.go``, ``BuildRawPod``: the primary container of every
  pod a k8s plugin builds (a ``container`` target, or a ``k8s_pod`` target: ``@task(pod_template=...)``);
- ``flytepropeller/pkg/controller/nodes/array/`` (``handler.go`` ``buildArrayNodeContext``, ``execution_context.go``,
  ``node_execution_context.go``): how an ArrayNode (flytekit's ``map_task``) runs each element: as its own node of
  the sub-task's plugin (for task type ``mpi``: its own MPIJob), with the element's index in the environment.

Both plugins read the custom struct with jsonpb and ``AllowUnknownFields: true``
(``flyteplugins/go/tasks/pluginmachinery/utils/marshal_utils.go``, ``flytestdlib/utils/marshal_utils.go``): a field
the proto does not know is dropped without a word; ``unknown_fields`` lists them.
"""

from dataclasses import dataclass, field
from typing import Any, Collection, Dict, List, Optional, Set

from flyteidl.core import tasks_pb2
from flyteidl.plugins import mpi_pb2 as mpi_v0
from flyteidl.plugins import spark_pb2
from flyteidl.plugins.kubeflow import common_pb2 as kubeflow_common
from flyteidl.plugins.kubeflow import mpi_pb2 as kubeflow_mpi
from google.protobuf import json_format
from google.protobuf.message import Message

FLYTE = "flyteorg/flyte v1.16.8 (51877f899c9f95e0cb5efe90444eb0c6c6ea48a9)"
MPI_GO = "flyteplugins/go/tasks/plugins/k8s/kfoperators/mpi/mpi.go"
SPARK_GO = "flyteplugins/go/tasks/plugins/k8s/spark/spark.go"

_CLEAN_POD_POLICY = {kubeflow_common.CLEANPOD_POLICY_NONE: "None", kubeflow_common.CLEANPOD_POLICY_ALL: "All",
                     kubeflow_common.CLEANPOD_POLICY_RUNNING: "Running"}


class BadTaskSpecification(Exception):
    """propeller's ``errors.BadTaskSpecification``: the task fails before any resource is created."""


def _custom(template: tasks_pb2.TaskTemplate) -> Dict[str, Any]:
    return json_format.MessageToDict(template.custom)


def read_custom(template: tasks_pb2.TaskTemplate, message: Message) -> Message:
    """``utils.UnmarshalStruct``: the custom struct as ``message``, unknown fields dropped."""
    return json_format.ParseDict(_custom(template), message, ignore_unknown_fields=True)


def unknown_fields(template: tasks_pb2.TaskTemplate, message: Message) -> Set[str]:
    """Top-level fields of the custom that ``message`` does not have: jsonpb drops them silently."""
    known = {f.json_name for f in message.DESCRIPTOR.fields} | {f.name for f in message.DESCRIPTOR.fields}
    return set(_custom(template)) - known


# ---------------------------------------------------------------- mpi.go
@dataclass
class MPIJobSpec:
    """The parts of the kubeflow.org/v1 ``MPIJobSpec`` propeller sets that decide how many ranks can run."""

    slots_per_worker: int
    launcher_replicas: int
    worker_replicas: int
    run_policy: Dict[str, Any] = field(default_factory=dict)
    launcher_args: Optional[List[str]] = None  # a replica ``command`` override of the container args, if any
    worker_args: Optional[List[str]] = None


def _replicas(spec: kubeflow_mpi.DistributedMPITrainingReplicaSpec) -> int:
    return spec.common.replicas if spec.HasField("common") else spec.replicas


def _run_policy(policy: kubeflow_common.RunPolicy) -> Dict[str, Any]:
    """``common.ParseRunPolicy``."""
    parsed: Dict[str, Any] = {"cleanPodPolicy": _CLEAN_POD_POLICY[policy.clean_pod_policy]}
    for name, value in (("backoffLimit", policy.backoff_limit),
                        ("activeDeadlineSeconds", policy.active_deadline_seconds),
                        ("ttlSecondsAfterFinished", policy.ttl_seconds_after_finished)):
        if value != 0:
            parsed[name] = value
    return parsed


def mpi_job(template: tasks_pb2.TaskTemplate) -> MPIJobSpec:
    """``mpiOperatorResourceHandler.BuildResource`` for ``template``."""
    if template.task_type_version == 0:
        old = read_custom(template, mpi_v0.DistributedMPITrainingTask())
        spec = MPIJobSpec(slots_per_worker=old.slots, launcher_replicas=max(old.num_launcher_replicas, 1),
                          worker_replicas=old.num_workers)
    elif template.task_type_version == 1:
        task = read_custom(template, kubeflow_mpi.DistributedMPITrainingTask())
        spec = MPIJobSpec(slots_per_worker=1, launcher_replicas=1, worker_replicas=_replicas(task.worker_replicas),
                          run_policy=_run_policy(task.run_policy) if task.HasField("run_policy") else {},
                          launcher_args=list(task.launcher_replicas.command) or None,
                          worker_args=list(task.worker_replicas.command) or None)
    else:
        raise BadTaskSpecification(f"unsupported task template version [{template.task_type_version}]")
    if spec.worker_replicas <= 0:
        raise BadTaskSpecification("number of workers must be greater than 0")
    return spec


# ---------------------------------------------------------------- spark.go
@dataclass
class SparkApplicationSpec:
    """The parts of the sparkoperator.k8s.io/v1beta2 ``SparkApplicationSpec`` propeller sets from the ``SparkJob``."""

    type: str
    main_application_file: Optional[str]
    main_class: Optional[str]
    arguments: List[str]
    spark_conf: Dict[str, str]
    hadoop_conf: Dict[str, str]
    batch_scheduler: Optional[str]
    driver_cores: Optional[int]
    executor_cores: Optional[int]
    executor_instances: Optional[int]


def _int(conf: Dict[str, str], key: str) -> Optional[int]:
    try:
        return int(conf[key])
    except (KeyError, ValueError):
        return None


def spark_application(template: tasks_pb2.TaskTemplate, default_conf: Optional[Dict[str, str]] = None
                      ) -> SparkApplicationSpec:
    """``sparkResourceHandler.BuildResource`` for ``template``; ``default_conf`` is the plugin's
    ``spark-config-default``. Spark "features" (``spark.flyte.<name>.enabled``) are left out: none is configured."""
    job = read_custom(template, spark_pb2.SparkJob())
    if not job.mainApplicationFile and not job.mainClass:
        raise BadTaskSpecification("either MainApplicationFile or MainClass must be set")
    conf = dict(default_conf or {})
    if job.executorPath:
        conf["spark.pyspark.python"] = conf["spark.pyspark.driver.python"] = job.executorPath
    conf.update(job.sparkConf)
    for role in ("driver", "executor"):
        limit = f"spark.kubernetes.{role}.limit.cores"
        if not conf.get(limit):
            source = conf.get(f"spark.kubernetes.{role}.request.cores") or conf.get(f"spark.{role}.cores")
            if source:
                conf[limit] = source
    kinds = {spark_pb2.SparkApplication.PYTHON: "Python", spark_pb2.SparkApplication.JAVA: "Java",
             spark_pb2.SparkApplication.SCALA: "Scala", spark_pb2.SparkApplication.R: "R"}
    return SparkApplicationSpec(
        type=kinds[job.applicationType], main_application_file=job.mainApplicationFile or None,
        main_class=job.mainClass or None, arguments=list(template.container.args), spark_conf=conf,
        hadoop_conf=dict(job.hadoopConf), batch_scheduler=conf.get("spark.batchScheduler"),
        driver_cores=_int(conf, "spark.driver.cores"), executor_cores=_int(conf, "spark.executor.cores"),
        executor_instances=_int(conf, "spark.executor.instances"))


# ---------------------------------------------------------------- pod_helper.go
PRIMARY_CONTAINER_KEY = "primary_container_name"


def primary_container(template: tasks_pb2.TaskTemplate) -> Dict[str, Any]:
    """``BuildRawPod``: the primary container (``image``, ``args``, ...) of the pods built for ``template``."""
    if template.HasField("container"):
        return json_format.MessageToDict(template.container)
    if not template.HasField("k8s_pod"):
        raise BadTaskSpecification("invalid TaskSpecification, unable to determine Pod configuration")
    if PRIMARY_CONTAINER_KEY not in template.config:
        raise BadTaskSpecification(f"invalid TaskSpecification, config missing [{PRIMARY_CONTAINER_KEY}] key")
    containers = json_format.MessageToDict(template.k8s_pod.pod_spec).get("containers", [])
    name = template.config[PRIMARY_CONTAINER_KEY]
    return next(c for c in containers if c.get("name") == name)


# ---------------------------------------------------------------- nodes/array (map_task)
ARRAY_DIR = "flytepropeller/pkg/controller/nodes/array/"


def array_element_env(index: int) -> Dict[str, str]:
    """``newArrayExecutionContext`` (``execution_context.go``): what propeller adds to the execution config's
    environment variables of element ``index``. The task handler hands them to the plugin as
    ``GetEnvironmentVariables()`` (``flytepropeller/pkg/controller/nodes/task/taskexec_context.go``), and
    ``flytek8s.ToK8sPodSpec`` sets them on the primary container (``pluginmachinery/flytek8s/container_helper.go``,
    ``DecorateEnvVars``); the mpi plugin builds the launcher and every worker replica with it
    (``kfoperators/common/common_operator.go``, ``ToReplicaSpec``), so every rank's pod has them."""
    return {"BATCH_JOB_ARRAY_INDEX_VAR_NAME": "FLYTE_K8S_ARRAY_INDEX", "FLYTE_K8S_ARRAY_INDEX": str(index)}


def array_element_input(inputs: Dict[str, Any], index: int, bound: Collection[str] = ()) -> Dict[str, Any]:
    """``constructLiteralMap`` (``node_execution_context.go``): the element's inputs propeller reads (cache keys).
    Its ``staticInputReader`` keeps the ArrayNode's own input paths, so ``{{.input}}`` in the element's command is the
    ArrayNode's inputs file, lists and all: flytekit picks the element by ``FLYTE_K8S_ARRAY_INDEX``."""
    return {name: value if name in bound or not isinstance(value, list) else value[index]
            for name, value in inputs.items()}
