"""What a registered task must look like for the Flyte backend plugins and the operators to run it as designed.

Each ``check_*`` raises ``AssertionError`` with a message naming the task and the field that is wrong. The
expected operator commands are written out here on purpose (not taken from the plugin), so a change in the plugin
that alters what the operators run fails these checks.
"""

import os
from dataclasses import dataclass
from typing import Dict, List, Tuple, Union

from flyteidl.admin import workflow_pb2
from flyteidl.core import tasks_pb2, types_pb2
from google.protobuf.json_format import MessageToDict

# kfmpi's mpirun base command (flytekitplugins-kfmpi MPIFunctionTask._MPI_BASE_COMMAND), what its users' launchers run.
MPIRUN_BASE = ["mpirun", "--allow-run-as-root", "-bind-to", "none", "-map-by", "slot", "-x", "LD_LIBRARY_PATH",
               "-x", "PATH", "-x", "NCCL_DEBUG=INFO", "-mca", "pml", "ob1", "-mca", "btl", "^openib"]
HOSTFILE_REF = "$(OMPI_MCA_orte_default_hostfile)"  # expanded by Kubernetes from the launcher container's env
# What the launcher pod runs first: the plugin's launcher, which gives each worker the task's slots (propeller gives 1).
CLUSTER_LAUNCHER = ["python", "-m", "horovod_flyte_runtime.cluster_launcher", "--slots"]
RESOLVER = "flytekit.core.python_auto_container.default_task_resolver"


def pyflyte_execute(module: str, task: str) -> List[str]:
    """The per-process command every Flyte python task runs, with propeller's templates still in it."""
    return ["pyflyte-execute", "--inputs", "{{.input}}", "--output-prefix", "{{.outputPrefix}}",
            "--raw-output-data-prefix", "{{.rawOutputDataPrefix}}", "--checkpoint-path", "{{.checkpointOutputPrefix}}",
            "--prev-checkpoint", "{{.prevCheckpointPrefix}}", "--resolver", RESOLVER, "--", "task-module", module,
            "task-name", task]


def launcher_args(where: str, args: List[str], slots: int) -> List[str]:
    """The launcher command inside ``cluster_launcher --slots <slots> --``; fails unless it is wrapped so."""
    assert args[:len(CLUSTER_LAUNCHER) + 2] == CLUSTER_LAUNCHER + [str(slots), "--"], (
        f"{where}: the launcher command must start with {' '.join(CLUSTER_LAUNCHER)} {slots} --, got {args[:6]}")
    return args[len(CLUSTER_LAUNCHER) + 2:]


@dataclass
class Python:
    """A plain container task."""


@dataclass
class MpiRoute:
    """An MPIJob for the training-operator: ``workers`` pods x ``slots`` ranks each; the launcher runs ``launcher``."""

    workers: int
    slots: int = 1
    launcher: str = "horovodrun"  # "mpirun" (Horovod(controller="mpi")) or "horovodrun" (controller "gloo")

    @property
    def ranks(self) -> int:
        return self.workers * self.slots


@dataclass
class ElasticRoute:
    """kfmpi's HorovodJob for the training-operator: ``workers`` pods x ``slots``, elastic between the bounds; the
    launcher runs ``horovodrun`` with the operator's host discovery script around pyflyte-execute (kfmpi's form)."""

    workers: int
    min_workers: int
    max_workers: int
    slots: int = 1
    discovery: str = "/etc/mpi/discover_hosts.sh"


@dataclass
class SparkRoute:
    """A SparkApplication: the driver runs the body; ``ranks`` > 0 means Horovod needs that many executor slots."""

    spark_conf: Dict[str, str]
    ranks: int = 0


Expected = Union[Python, MpiRoute, ElasticRoute, SparkRoute]


def _where(template: tasks_pb2.TaskTemplate) -> str:
    return f"task {template.id.name}"


def check_task(template: tasks_pb2.TaskTemplate, expected: Expected, python: str) -> None:
    """Check one registered task against its design; ``python`` is the interpreter the specs were made for."""
    where = _where(template)
    module, _, name = template.id.name.rpartition(".")
    entrypoint = os.path.join(os.path.dirname(os.path.dirname(python)), "bin", "entrypoint.py")
    container = template.container
    assert list(container.command) == [], f"{where}: container.command must be empty (the image entrypoint runs args)"
    args = list(container.args)
    execute = pyflyte_execute(module, name)
    want_type = {Python: "python-task", MpiRoute: "mpi", ElasticRoute: "mpi", SparkRoute: "spark"}[type(expected)]
    assert template.type == want_type, f"{where}: task type {template.type!r}, the design needs {want_type!r}"
    custom = MessageToDict(template.custom)

    if isinstance(expected, Python):
        assert args == execute, f"{where}: container args {args} are not pyflyte-execute's"
    elif isinstance(expected, SparkRoute):
        check_spark(where, custom, args, execute, expected, python, entrypoint)
    elif isinstance(expected, ElasticRoute):
        check_elastic(where, template, custom, args, execute, expected)
    else:
        check_mpi(where, template, custom, args, execute, expected, entrypoint)


def check_spark(where, custom, args, execute, expected: SparkRoute, python: str, entrypoint: str) -> None:
    # The Spark operator runs spark-submit itself; the container args become the application's arguments.
    assert args == execute, f"{where}: Spark driver arguments {args} are not pyflyte-execute's"
    assert custom.get("mainApplicationFile") == "local://" + entrypoint, (
        f"{where}: mainApplicationFile {custom.get('mainApplicationFile')!r}, want local://{entrypoint}")
    assert custom.get("executorPath") == python, f"{where}: executorPath {custom.get('executorPath')!r}, want {python}"
    assert custom.get("applicationType", "PYTHON") == "PYTHON", f"{where}: applicationType {custom['applicationType']}"
    conf = custom.get("sparkConf", {})
    missing = {k: v for k, v in expected.spark_conf.items() if conf.get(k) != v}
    assert not missing, f"{where}: sparkConf lacks the task's settings {missing}; registered {conf}"
    if expected.ranks:
        instances, cores = int(conf.get("spark.executor.instances", 0)), int(conf.get("spark.executor.cores", 1))
        slots = instances * (cores // int(conf.get("spark.task.cpus", 1)))
        assert slots >= expected.ranks, (
            f"{where}: sparkConf gives {slots} executor task slots ({instances} executors x {cores} cores), "
            f"Horovod needs {expected.ranks} ranks at once")


def check_mpi(where, template, custom, args, execute, expected: MpiRoute, entrypoint: str) -> None:
    assert template.task_type_version == 1, f"{where}: task_type_version {template.task_type_version}, want 1"
    workers = int(custom.get("workerReplicas", {}).get("replicas", 0))
    launchers = int(custom.get("launcherReplicas", {}).get("replicas", 0))
    slots = int(custom.get("slots", 1))
    assert (workers, slots) == (expected.workers, expected.slots), (
        f"{where}: workerReplicas.replicas={workers}, slots={slots}; the design needs {expected.workers} worker pods x "
        f"{expected.slots} slots = {expected.ranks} ranks")
    assert launchers == 1, f"{where}: launcherReplicas.replicas={launchers}, want 1"

    # The launcher's command: cluster_launcher -- <launcher> ... python <entrypoint> pyflyte-execute ... (every rank
    # runs the latter).
    args = launcher_args(where, args, expected.slots)
    assert "python" in args, f"{where}: no 'python <entrypoint>' in the launcher command {args}"
    at = args.index("python")
    launcher, per_rank = args[:at], args[at + 2:]
    assert args[at + 1] == entrypoint, f"{where}: ranks run {args[at + 1]!r}, want flytekit's entrypoint {entrypoint}"
    assert per_rank == execute, f"{where}: each rank must run pyflyte-execute for this task, got {per_rank}"
    np_ = launcher[launcher.index("-np") + 1] if "-np" in launcher else None
    assert np_ == str(expected.ranks), f"{where}: launcher starts -np {np_}, the design needs {expected.ranks} ranks"
    if expected.launcher == "mpirun":
        assert launcher[:len(MPIRUN_BASE)] == MPIRUN_BASE, f"{where}: launcher {launcher} is not kfmpi's mpirun"
        rest = launcher[len(MPIRUN_BASE):]
        assert rest[0] == "--tag-output", f"{where}: mpirun should tag output lines with ranks: {rest}"
        exported = [rest[i + 1] for i, a in enumerate(rest) if a == "-x"]
        assert all(e.startswith("HOROVOD_") for e in exported), f"{where}: unexpected mpirun exports {exported}"
        assert rest[-2:] == ["-np", str(expected.ranks)], f"{where}: mpirun arguments end {rest[-2:]}"
    else:
        assert launcher[:5] == ["horovodrun", "-np", str(expected.ranks), "--hostfile", HOSTFILE_REF], (
            f"{where}: launcher {launcher[:5]} is not horovodrun on the operator's hostfile")
        assert "--gloo" in launcher, f"{where}: horovodrun without --gloo: {launcher}"


def check_elastic(where, template, custom, args, execute, expected: ElasticRoute) -> None:
    assert template.task_type_version == 1, f"{where}: task_type_version {template.task_type_version}, want 1"
    workers, slots = int(custom["workerReplicas"]["replicas"]), int(custom.get("slots", 1))
    assert (workers, slots) == (expected.workers, expected.slots), f"{where}: {workers} workers x {slots} slots"
    args = launcher_args(where, args, expected.slots)
    assert "pyflyte-execute" in args, f"{where}: no pyflyte-execute in the launcher command {args}"
    launcher, per_rank = args[:args.index("pyflyte-execute")], args[args.index("pyflyte-execute"):]
    assert per_rank == execute, f"{where}: each rank must run pyflyte-execute for this task, got {per_rank}"
    flag = {a: launcher[i + 1] for i, a in enumerate(launcher) if a.startswith("--") and i + 1 < len(launcher)}
    assert launcher[:3] == ["horovodrun", "-np", str(workers * slots)], f"{where}: launcher {launcher[:3]}"
    want = {"--min-np": str(expected.min_workers * slots), "--max-np": str(expected.max_workers * slots),
            "--slots-per-host": str(slots), "--host-discovery-script": expected.discovery}
    got = {k: flag.get(k) for k in want}
    assert got == want, f"{where}: elastic flags {got}, the design needs {want}"


# ---------------------------------------------------------------- workflows
Source = Tuple[str, str]  # (task short name or "" for the workflow's inputs, variable)


def _node_tasks(spec: workflow_pb2.WorkflowSpec) -> Dict[str, str]:
    return {n.id: n.task_node.reference_id.name.rpartition(".")[2] for n in spec.template.nodes}


def _source(binding, tasks: Dict[str, str]) -> Source:
    promise = binding.promise
    return (tasks.get(promise.node_id, ""), promise.var)


def edges(spec: workflow_pb2.WorkflowSpec) -> Dict[str, Dict[str, Source]]:
    """Each task node's inputs, as (upstream task, output) or ("", workflow input); plus "outputs"."""
    tasks = _node_tasks(spec)
    graph = {}
    for node in spec.template.nodes:
        inputs = {b.var: _source(b.binding, tasks) for b in node.inputs}
        upstream = {tasks[i] for i in node.upstream_node_ids}
        referenced = {src for src, _ in inputs.values() if src}
        assert upstream == referenced, (
            f"node {node.id} ({tasks[node.id]}): upstream {sorted(upstream)} != nodes its inputs come from "
            f"{sorted(referenced)}")
        graph[tasks[node.id]] = inputs
    graph["outputs"] = {b.var: _source(b.binding, tasks) for b in spec.template.outputs}
    return graph


def check_edges(spec: workflow_pb2.WorkflowSpec, expected: Dict[str, Dict[str, Source]]) -> None:
    got = edges(spec)
    assert got == expected, f"workflow {spec.template.id.name}: edges\n  {got}\nwant\n  {expected}"


def is_directory(literal_type: types_pb2.LiteralType) -> bool:
    return (literal_type.HasField("blob")
            and literal_type.blob.dimensionality == types_pb2.BlobType.BlobDimensionality.MULTIPART)


def check_directory_outputs(where: str, interface, names: List[str]) -> None:
    """These outputs must be FlyteDirectory (multipart blobs) in the registered interface."""
    variables = interface.outputs.variables
    for name in names:
        assert name in variables, f"{where}: no output {name!r} (has {sorted(variables)})"
        assert is_directory(variables[name].type), (
            f"{where}: output {name!r} is {MessageToDict(variables[name].type)}, want a FlyteDirectory")


def check_no_required_inputs(launch_plan) -> None:
    """The default launch plan can start with no inputs (every workflow input has a default)."""
    required = [name for name, p in launch_plan.spec.default_inputs.parameters.items() if p.required]
    assert not required, f"launch plan {launch_plan.id.name}: inputs without defaults {required}"
