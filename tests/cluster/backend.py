"""What the Flyte backend and the Kubernetes operators do with a registered task, done here with local folders.

Nothing in this module decides WHAT runs: the commands come from the task specs ``pyflyte package`` wrote.
This module only does the substitutions the cluster does before running them:

- FlyteAdmin/propeller: write the task's inputs as an ``inputs.pb`` LiteralMap, render the ``{{.input}}``-style
  templates of the container args into per-attempt paths, set the ``FLYTE_INTERNAL_*`` environment variables
  (flyteplugins ``pluginmachinery/utils/template.go`` and ``flytek8s/k8s_resource_adds.go``);
- the training-operator's MPIJob controller: mount a hostfile and set ``OMPI_MCA_orte_default_hostfile`` on the
  launcher container, write ``discover_hosts.sh``, both with the ``slotsPerWorker`` propeller gave the MPIJob
  (``propeller.mpi_job``: always 1 for our tasks) (kubeflow/training-operator v1.8.1, 0f8735fa,
  ``pkg/controller.v1/mpi/mpijob_controller.go``: ``newLauncher``, ``newConfigMap``,
  ``updateDiscoverHostsInConfigMap``);
- the kubelet: expand ``$(VAR)`` references in container args from the container's declared environment;
- Flyte's Spark plugin + the Spark operator: turn the ``SparkJob`` custom into Spark properties (executor path ->
  ``spark.pyspark.python``/``spark.pyspark.driver.python``) and start the driver with the image's entrypoint in
  ``driver`` mode: ``spark-submit --deploy-mode client --properties-file ... <mainApplicationFile> <args>``
  (flyteplugins ``k8s/spark/spark.go``; Spark's ``kubernetes/dockerfiles/spark/entrypoint.sh``).
"""

import json
import os
import re
import signal
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from flyteidl.core import literals_pb2, tasks_pb2

from tests.cluster.propeller import mpi_job
from tests.cluster.registration import custom
from tests.conftest import ROOT, Ran, _leftovers, run_command

OBSERVER = Path(__file__).resolve().parent / "observer"
ENTRYPOINT_SH = ROOT / "docker" / "entrypoint.sh"


# ---------------------------------------------------------------- propeller: one attempt of a task
_TEMPLATE = re.compile(r"\{\{\s*[.$](\w+)\s*\}\}", re.IGNORECASE)


@dataclass
class Attempt:
    """The blob-store paths and environment propeller gives one attempt of a task, as local folders."""

    root: Path
    project: str = "flytesnacks"
    domain: str = "development"
    execution_id: str = "clustertest0001"
    attempt: int = 0
    prev_checkpoint: Optional[Path] = None  # a retry: the previous attempt's checkpoint prefix

    def __post_init__(self):
        for sub in ("inputs", "outputs", "raw", "checkpoint"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    @property
    def inputs_pb(self) -> Path:
        return self.root / "inputs" / "inputs.pb"

    @property
    def output_prefix(self) -> Path:
        return self.root / "outputs"

    @property
    def raw_output_prefix(self) -> Path:
        return self.root / "raw"

    @property
    def checkpoint_prefix(self) -> Path:
        return self.root / "checkpoint"

    def write_inputs(self, template: tasks_pb2.TaskTemplate, values: Dict[str, Any]) -> None:
        """Convert Python values to literals against the REGISTERED interface (as a client does) -> inputs.pb."""
        from flytekit import FlyteContextManager
        from flytekit.core.type_engine import TypeEngine
        from flytekit.models.literals import LiteralMap
        from flytekit.models.types import LiteralType

        ctx = FlyteContextManager.current_context()
        variables = template.interface.inputs.variables
        assert set(values) == set(variables), f"inputs {sorted(values)} != interface {sorted(variables)}"
        literals = {}
        for name, value in values.items():
            lt = LiteralType.from_flyte_idl(variables[name].type)
            literals[name] = TypeEngine.to_literal(ctx, value, TypeEngine.guess_python_type(lt), lt)
        self.inputs_pb.write_bytes(LiteralMap(literals).to_flyte_idl().SerializeToString())

    def render(self, args: List[str]) -> List[str]:
        """propeller's template rendering of container args (a first attempt has no previous checkpoint)."""
        values = {
            "input": str(self.inputs_pb),
            "inputprefix": str(self.inputs_pb.parent),
            "outputprefix": str(self.output_prefix),
            "rawoutputdataprefix": str(self.raw_output_prefix),
            "checkpointoutputprefix": str(self.checkpoint_prefix),
            "prevcheckpointprefix": str(self.prev_checkpoint) if self.prev_checkpoint else '""',
            "perretryuniquekey": f"{self.execution_id}-n0-{self.attempt}",
        }

        def sub(match: re.Match) -> str:
            key = match.group(1).lower()
            assert key in values, f"propeller has no template variable {match.group(0)}"
            return values[key]

        return [_TEMPLATE.sub(sub, arg) for arg in args]

    def env(self, template: tasks_pb2.TaskTemplate) -> Dict[str, str]:
        """The environment the task's pod gets: the spec's own env plus what propeller adds."""
        task_id = template.id
        env = {kv.key: kv.value for kv in template.container.env}
        env.update({
            "FLYTE_INTERNAL_EXECUTION_ID": self.execution_id,
            "FLYTE_INTERNAL_EXECUTION_PROJECT": self.project,
            "FLYTE_INTERNAL_EXECUTION_DOMAIN": self.domain,
            "FLYTE_INTERNAL_TASK_PROJECT": task_id.project or self.project,
            "FLYTE_INTERNAL_TASK_DOMAIN": task_id.domain or self.domain,
            "FLYTE_INTERNAL_TASK_NAME": task_id.name,
            "FLYTE_INTERNAL_TASK_VERSION": task_id.version or "v1",
            "FLYTE_ATTEMPT_NUMBER": str(self.attempt),
        })
        return env

    def outputs(self) -> Dict[str, literals_pb2.Literal]:
        path = self.output_prefix / "outputs.pb"
        assert path.exists(), f"no outputs.pb in {self.output_prefix}: {sorted(os.listdir(self.output_prefix))}"
        return dict(literals_pb2.LiteralMap.FromString(path.read_bytes()).literals)

    def error_files(self) -> List[str]:
        return sorted(p.name for p in self.output_prefix.iterdir() if p.name.startswith("error"))


def value(literal: literals_pb2.Literal) -> Any:
    """A literal's plain value: primitives, blob URIs, collections, maps."""
    if literal.HasField("collection"):
        return [value(item) for item in literal.collection.literals]
    if literal.HasField("map"):
        return {k: value(v) for k, v in literal.map.literals.items()}
    scalar = literal.scalar
    if scalar.HasField("blob"):
        return scalar.blob.uri
    primitive = scalar.primitive
    return getattr(primitive, primitive.WhichOneof("value"))


def run_pod_command(args: List[str], env: Dict[str, str], timeout: float, on: Sequence[str] = ()) -> Ran:
    """``run_command`` for a pod's command; on a timeout, stop what it started and fail with a clear message.

    ``on``: a command prefix that runs it elsewhere than here (e.g. in another network namespace).
    """
    token = f"CLUSTER_TEST_POD_{uuid.uuid4().hex}"
    try:
        return run_command([*on, *args], env={**env, token: "1"}, timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in _leftovers(token):  # only processes of this run carry the token
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        raise AssertionError(f"the pod command did not finish in {timeout:.0f} s: {' '.join(args)}") from None


# ---------------------------------------------------------------- kubelet: $(VAR) in container args
def expand_k8s(arg: str, env: Dict[str, str]) -> str:
    """Kubernetes' expansion of container command/args: ``$(NAME)`` -> value of NAME in the container's env
    (left as is when NAME is not defined), ``$$`` -> ``$`` (k8s.io/kubernetes third_party/forked/golang/expansion)."""
    out, i = [], 0
    while i < len(arg):
        if arg[i] == "$" and i + 1 < len(arg):
            nxt = arg[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = arg.find(")", i + 2)
                if end != -1:
                    name = arg[i + 2:end]
                    out.append(env[name] if name in env else arg[i:end + 1])
                    i = end + 1
                    continue
        out.append(arg[i])
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- the MPI operator's launcher
def operator_hostfile(workers: Sequence[str], slots_per_worker: int) -> str:
    """``newConfigMap``'s hostfile: one ``<worker> slots=<slotsPerWorker>`` line per worker pod (no GPU launcher)."""
    return "".join(f"{worker} slots={slots_per_worker}\n" for worker in workers)


def operator_discovery_script(workers: Sequence[str], slots_per_worker: int) -> str:
    """``updateDiscoverHostsInConfigMap``'s ``discover_hosts.sh``: ``echo <pod>:<slotsPerWorker>`` per running pod."""
    return "#!/bin/sh" + "".join(f"\necho {worker}:{slots_per_worker}" for worker in workers)


def mpi_launcher(template: tasks_pb2.TaskTemplate, attempt: Attempt, workdir: Path,
                 extra_env: Optional[Dict[str, str]] = None, workers: Optional[Sequence[str]] = None,
                 on: Sequence[str] = (), timeout: float = 180, mounts: Optional[Dict[str, str]] = None) -> Ran:
    """Run the launcher container's command with the operator's hostfile for the MPIJob propeller builds.

    Pass the worker hosts as ``workers`` (and ``on``, the prefix that runs the launcher in its own host) to run the
    ranks there: the hostfile then lists each with propeller's ``slotsPerWorker``. Without ``workers``, localhost
    stands for all worker pods (Open MPI refuses a hostfile naming one host twice): ``localhost slots=<worker pods x
    slotsPerWorker>``. ``mounts`` maps a file the operator mounts in the launcher pod (e.g.
    ``/etc/mpi/discover_hosts.sh``) to a local file.
    """
    job = mpi_job(template)
    hostfile = workdir / "hostfile"
    if workers is None:
        hostfile.write_text(operator_hostfile(["localhost"], job.worker_replicas * job.slots_per_worker))
    else:
        assert len(workers) == job.worker_replicas, f"{len(workers)} worker hosts for {job.worker_replicas} pods"
        hostfile.write_text(operator_hostfile(workers, job.slots_per_worker))
    container_env = {**attempt.env(template), "OMPI_MCA_orte_default_hostfile": str(hostfile)}
    args = [expand_k8s(a, container_env) for a in attempt.render(list(template.container.args))]
    args = [(mounts or {}).get(a, a) for a in args]
    assert list(template.container.command) == [], "the image's entrypoint must run the args (pass-through)"
    ran = run_pod_command(["bash", str(ENTRYPOINT_SH), *args], env={**container_env, **(extra_env or {})},
                          timeout=timeout, on=on)
    ran.command = args  # what the launcher container ran, after propeller's and the kubelet's substitutions
    return ran


# ---------------------------------------------------------------- the Spark operator's driver
def spark_driver(template: tasks_pb2.TaskTemplate, attempt: Attempt, workdir: Path, master: str = "local[2]",
                 extra_env: Optional[Dict[str, str]] = None, on: Sequence[str] = (), timeout: float = 180) -> Ran:
    """Start the Spark driver as the driver pod does, with ``--master local[2]`` instead of ``k8s://``.

    ``extra_env`` may set ``SPARK_DRIVER_BIND_ADDRESS`` (the driver pod's IP) and ``on`` run it in another host.
    """
    import pyspark

    job = custom(template)
    conf = dict(job.get("sparkConf", {}))
    if job.get("executorPath"):  # flyteplugins spark.go getSparkConfig
        conf["spark.pyspark.python"] = job["executorPath"]
        conf["spark.pyspark.driver.python"] = job["executorPath"]
    conf["spark.app.name"] = f"{attempt.execution_id}-{template.id.name}"
    properties = workdir / "spark.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in sorted(conf.items())))
    args = attempt.render(list(template.container.args))
    env = {
        **attempt.env(template),
        "SPARK_HOME": os.path.dirname(pyspark.__file__),
        "SPARK_DRIVER_BIND_ADDRESS": "127.0.0.1",  # the driver pod's IP; here the loopback
        **(extra_env or {}),
    }
    command = ["bash", str(ENTRYPOINT_SH), "driver", "--master", master, "--properties-file", str(properties),
               job["mainApplicationFile"], *args]
    ran = run_pod_command(command, env=env, timeout=timeout, on=on)
    ran.command = command[2:]  # after the entrypoint script: driver --master ... <application> <args>
    return ran


# ---------------------------------------------------------------- who wrote what
def observed_env(log: Path) -> Dict[str, str]:
    """Environment that loads ``observer/sitecustomize.py`` in every Python process, logging file writes to ``log``."""
    path = os.pathsep.join(filter(None, [str(OBSERVER), os.environ.get("PYTHONPATH", "")]))
    return {"PYTHONPATH": path, "CLUSTER_TEST_WRITE_LOG": str(log)}


def writes(log: Path, under: Optional[Path] = None) -> List[Dict[str, Any]]:
    """The logged writes (each: event, path, rank, pid), of files under ``under`` or anywhere."""
    if not log.exists():
        return []
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    if under is None:
        return entries
    root = os.path.realpath(under)
    return [e for e in entries if os.path.realpath(e["path"]).startswith(root + os.sep)]
