"""A Flyte 2 ``MPIJob`` task as the Flyte 2 backend and the MPI operator run it: the serialized template read as
flyteorg/flyte's ``mpi.go`` reads it, its launcher command rendered and run here with the operator's hostfile, real
``horovodrun --gloo`` and real ``mpirun``, 2 ranks.

What the cluster does, done here with local folders (flyteorg/flyte ``main``, the Flyte 2 backend, commit
6fadb90d65af26f4db908ec1c5f5af546a3e4299):

- ``flyteplugins/go/tasks/plugins/k8s/kfoperators/mpi/mpi.go`` (``BuildResource``, task type version 1): the launcher
  container runs the template's container args; ``SlotsPerWorker`` is 1 whatever ``slots`` says (tests/cluster's
  ``propeller.mpi_job`` transcribes the same code of v1.16.8, which this commit has unchanged);
- ``flyteplugins/go/tasks/pluginmachinery/core/template/template.go``: ``{{.input}}``, ``{{.outputPrefix}}``,
  ``{{.rawOutputDataPrefix}}``, ``{{.checkpointOutputPrefix}}``, ``{{.prevCheckpointPrefix}}`` rendered;
  ``{{.runName}}`` and ``{{.actionName}}`` are left to ``a0``, which reads them from the pod's ``RUN_NAME`` and
  ``ACTION_NAME`` (``executor/pkg/plugin/task_exec_metadata.go``, with ``_U_RUN_BASE`` and ``_U_ORG_NAME``);
  ``actions/k8s/client.go`` fills ``{{.runStartTime}}``;
- ``executor/pkg/plugin/k8s/plugin_manager.go`` (``checkResourcePhase``): a job that succeeded is read for
  ``error.pb`` first, then ``outputs.pb``; a failed job is "Job failed", whatever was written.

The training-operator's hostfile and ``$(VAR)`` expansion are tests/cluster's (``backend``). No mocks: the ranks are
``a0`` processes that import the task's module and allreduce over Gloo or Open MPI.
"""

import asyncio
import os
import pathlib
import re

import pytest

pytest.importorskip("flyteplugins.horovod", reason="flyteplugins-horovod (and the flyte SDK) is not installed here")

from flyte._internal.runtime.task_serde import get_proto_task  # noqa: E402
from flyte.models import SerializationContext  # noqa: E402
from flyteidl2.core import execution_pb2  # noqa: E402
from flyteidl2.plugins.kubeflow import mpi_pb2  # noqa: E402
from google.protobuf import json_format  # noqa: E402

from tests.cluster.backend import expand_k8s, operator_hostfile, run_pod_command  # noqa: E402
from tests.flyte2.flows import allreduce as flows  # noqa: E402
from tests.support import ROOT  # noqa: E402

pytestmark = pytest.mark.needs_framework("pytorch")

LAUNCHER = ["python", "-m", "horovod_flyte_runtime.cluster_launcher", "--slots"]
RANK = ["python", "-m", "flyteplugins.horovod.cluster_rank", "a0"]
_TEMPLATE = re.compile(r"\{\{\s*[.$](\w+)\s*\}\}", re.IGNORECASE)


def _template(task):
    context = SerializationContext(version="v1", project="flytesnacks", domain="development", org="local",
                                   root_dir=ROOT)
    return get_proto_task(task, context)


def _mpi_job(template) -> dict:
    """What ``mpi.go`` builds for task type ``mpi`` version 1: workers from ``workerReplicas``, one launcher,
    ``SlotsPerWorker`` 1, the launcher container's args the template's."""
    assert (template.type, template.task_type_version) == ("mpi", 1)
    task = json_format.ParseDict(json_format.MessageToDict(template.custom), mpi_pb2.DistributedMPITrainingTask(),
                                 ignore_unknown_fields=True)
    replicas = task.worker_replicas.common.replicas if task.worker_replicas.HasField("common") \
        else task.worker_replicas.replicas
    assert replicas > 0, "number of workers must be greater than 0"
    return {"workers": replicas, "slots_per_worker": 1, "args": list(template.container.args)}


class Attempt:
    """One attempt's blob-store paths and the launcher pod's environment, as local folders."""

    def __init__(self, root: pathlib.Path, prev_checkpoint: str = '""'):
        self.root, self.prev_checkpoint = root, prev_checkpoint
        for sub in ("inputs", "outputs", "raw", "run"):
            (root / sub).mkdir(parents=True)
        self.inputs, self.outputs, self.raw = root / "inputs" / "inputs.pb", root / "outputs", root / "raw"
        # the attempt's checkpoint: one object the SDK writes, <raw output prefix>/_flytecheckpoints
        # (flyteplugins/go/tasks/pluginmachinery/ioutils/paths.go, ConstructCheckpointPath)
        self.checkpoint = self.raw / "_flytecheckpoints"

    def write_inputs(self, task, **values) -> None:
        from flyte._internal.runtime.convert import convert_from_native_to_inputs

        inputs = asyncio.run(convert_from_native_to_inputs(task.native_interface, **values))
        self.inputs.write_bytes(inputs.proto_inputs.SerializeToString())

    def render(self, args):
        values = {"input": str(self.inputs), "outputprefix": str(self.outputs), "rawoutputdataprefix": str(self.raw),
                  "checkpointoutputprefix": str(self.checkpoint), "prevcheckpointprefix": self.prev_checkpoint,
                  "runstarttime": "2026-11-28T10:00:00Z"}
        return [_TEMPLATE.sub(lambda m: values.get(m.group(1).lower(), m.group(0)), arg) for arg in args]

    def env(self, hostfile: pathlib.Path) -> dict:
        return {"ACTION_NAME": "a1", "RUN_NAME": "r2026", "_U_RUN_BASE": str(self.root / "run"),
                "_U_ORG_NAME": "local", "FLYTE_INTERNAL_EXECUTION_PROJECT": "flytesnacks",
                "FLYTE_INTERNAL_EXECUTION_DOMAIN": "development", "OMPI_MCA_orte_default_hostfile": str(hostfile)}

    def outputs_value(self, task):
        from flyte._internal.runtime.convert import convert_outputs_to_native
        from flyte._internal.runtime.io import load_outputs

        return asyncio.run(convert_outputs_to_native(task.native_interface,
                                                     asyncio.run(load_outputs(str(self.outputs / "outputs.pb")))))

    def error(self) -> execution_pb2.ErrorDocument:
        return execution_pb2.ErrorDocument.FromString((self.outputs / "error.pb").read_bytes())


def _launch(task, tmp_path, attempt_dir: str = "attempt", prev_checkpoint: str = '""', **inputs):
    """The launcher pod: the operator's hostfile (localhost stands for every worker pod, with the backend's 1 slot
    each), the rendered args with ``$(OMPI_MCA_orte_default_hostfile)`` expanded, run from the image's working
    directory."""
    template = _template(task)
    job = _mpi_job(template)
    attempt = Attempt(tmp_path / attempt_dir, prev_checkpoint)
    attempt.write_inputs(task, **inputs)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(operator_hostfile(["localhost"], job["workers"] * job["slots_per_worker"]))
    env = {**os.environ, **attempt.env(hostfile)}
    args = [expand_k8s(arg, env) for arg in attempt.render(job["args"])]
    return attempt, run_pod_command(args, env=env, timeout=180)


def test_the_template_is_an_mpi_job_whose_launcher_runs_a0_on_every_rank():
    template = _template(flows.allreduce)
    job = _mpi_job(template)
    assert job["workers"] == 2
    args = job["args"]
    assert args[:len(LAUNCHER) + 2] == LAUNCHER + ["1", "--"]
    launcher, per_rank = args[len(LAUNCHER) + 2:args.index("a0") - 3], args[args.index("a0") - 3:]
    assert launcher[:5] == ["horovodrun", "-np", "2", "--hostfile", "$(OMPI_MCA_orte_default_hostfile)"]
    assert "--gloo" in launcher
    assert per_rank[:len(RANK)] == RANK
    a0 = per_rank[len(RANK) - 1:]
    assert dict(zip(a0[1::2], a0[2::2]))["--outputs-path"] == "{{.outputPrefix}}"
    assert a0[-4:] == ["mod", "tests.flyte2.flows.allreduce", "instance", "allreduce"]
    mpirun = _mpi_job(_template(flows.allreduce_mpi))["args"]
    assert mpirun[len(LAUNCHER) + 2] == "mpirun" and mpirun[mpirun.index("a0") - 5:mpirun.index("a0") - 3] == \
        ["-np", "2"]


@pytest.mark.parametrize("task", [flows.allreduce, flows.allreduce_mpi, flows.allreduce_two_slots],
                         ids=["horovodrun gloo", "mpirun", "1 worker of 2 slots"])
def test_the_launcher_command_runs_two_ranks_and_rank_0s_result_is_the_output(tmp_path, task):
    """For the task of one worker pod of 2 slots the operator's hostfile says ``localhost slots=1`` (the backend's
    ``SlotsPerWorker`` is 1): its second rank exists only through the launcher's copy with the task's slots."""
    attempt, ran = _launch(task, tmp_path, x=1.0)
    assert ran.returncode == 0, ran.output[-4000:]
    assert attempt.outputs_value(task) == "rank 0 of 2: 3.0", ran.output[-4000:]  # both ranks took part
    assert sorted(os.listdir(attempt.outputs)) == ["outputs.pb"]  # rank 1 uploaded nothing, no error document
    assert (tmp_path / "hostfile").read_text() == f"localhost slots={_mpi_job(_template(task))['workers']}\n"


def test_a_rank_that_raises_is_the_task_s_error_named_and_not_retried(tmp_path):
    attempt, ran = _launch(flows.rank_1_raises, tmp_path, x=2.0)
    assert ran.returncode == 0, ran.output[-4000:]  # the job succeeds: the backend then reads error.pb first
    assert sorted(os.listdir(attempt.outputs)) == ["error.pb"], ran.output[-4000:]
    error = attempt.error().error
    assert error.code == "RankFailedError", error
    assert error.kind == execution_pb2.ContainerError.NON_RECOVERABLE
    assert "rank 1" in error.message and "ValueError: rank 1 refuses 2.0" in error.message, error.message


def test_a_killed_rank_is_the_task_s_error_named_and_retried(tmp_path):
    """Rank 1 is SIGKILLed: no ``a0`` of it writes anything, ``horovodrun`` fails, and the launcher writes the task's
    error where the backend reads it (exiting 0, as ``a0`` does, or the backend would say only "Job failed")."""
    attempt, ran = _launch(flows.rank_1_killed_on_the_first_attempt, tmp_path, log=str(tmp_path / "attempts.log"))
    assert ran.returncode == 0, ran.output[-4000:]
    assert sorted(os.listdir(attempt.outputs)) == ["error.pb"], ran.output[-4000:]
    error = attempt.error().error
    assert error.code == "RankLostError" and error.kind == execution_pb2.ContainerError.RECOVERABLE, error
    assert "rank 1" in error.message and "SIGKILL" in error.message, error.message


def test_a_retry_resumes_from_the_checkpoint_rank_0_saved_in_the_attempt_before(tmp_path):
    """Attempt 1's rank 0 saves to its ``--checkpoint-path`` and rank 1 is killed: a retryable error. Attempt 2 runs
    with ``--prev-checkpoint`` set to attempt 1's checkpoint prefix, as the backend renders it for a retry, and its
    rank 0 loads what attempt 1 saved (``flyte.ctx().checkpoint`` in an ``a0`` rank)."""
    log = str(tmp_path / "attempts.log")
    first, ran = _launch(flows.resumes_from_rank_0s_checkpoint, tmp_path, "attempt-1", log=log)
    assert ran.returncode == 0 and first.error().error.code == "RankLostError", ran.output[-4000:]
    assert first.checkpoint.is_file(), "attempt 1 saved no checkpoint"
    second, ran = _launch(flows.resumes_from_rank_0s_checkpoint, tmp_path, "attempt-2",
                          prev_checkpoint=str(first.checkpoint), log=log)
    assert ran.returncode == 0, ran.output[-4000:]
    output = second.outputs_value(flows.resumes_from_rank_0s_checkpoint)
    assert output == "rank 0 of 2: 3.0; restored attempt 1", ran.output[-4000:]
