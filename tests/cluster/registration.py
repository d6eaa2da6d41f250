"""FlyteAdmin's side of registration, done here: ``pyflyte package`` as a user runs it, and the task, workflow and
launch-plan specs of its archive read back by name (what ``pyflyte register`` would send)."""

import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from flyteidl.admin import launch_plan_pb2, task_pb2, workflow_pb2
from flyteidl.core import tasks_pb2
from google.protobuf.json_format import MessageToDict

from tests.conftest import VENV_BIN, run_command

IMAGE = "ghcr.io/example/flytekitplugins-horovod:test"
VENV_PYTHON = str(VENV_BIN / "python3")  # serialize for THIS venv, so the entrypoint path in the spec exists here


@dataclass
class Registration:
    """The entities of one ``pyflyte package`` archive, by name."""

    tasks: Dict[str, tasks_pb2.TaskTemplate] = field(default_factory=dict)
    workflows: Dict[str, workflow_pb2.WorkflowSpec] = field(default_factory=dict)
    launch_plans: Dict[str, launch_plan_pb2.LaunchPlan] = field(default_factory=dict)
    output: str = ""

    def task(self, name: str) -> tasks_pb2.TaskTemplate:
        assert name in self.tasks, f"task {name} was not registered; registered: {sorted(self.tasks)}"
        return self.tasks[name]

    def workflow(self, name: str) -> workflow_pb2.WorkflowSpec:
        assert name in self.workflows, f"workflow {name} was not registered; registered: {sorted(self.workflows)}"
        return self.workflows[name]


def package(pkgs: str, out_dir: Path, *extra: str, env: Optional[Dict[str, str]] = None,
            python: str = VENV_PYTHON) -> Registration:
    """Run ``pyflyte --pkgs <pkgs> package`` as a user would and read back every spec it wrote."""
    archive = out_dir / "flyte-package.tgz"
    args = [str(VENV_BIN / "pyflyte"), "--pkgs", pkgs, "package", "--image", IMAGE, "--output", str(archive),
            "--force"]
    if python:
        args += ["--python-interpreter", python]
    ran = run_command(args + list(extra), env=env, timeout=180)
    assert ran.returncode == 0, ran.output[-3000:]
    reg = Registration(output=ran.output)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if not member.name.endswith(".pb"):
                continue  # the code bundle of a fast (--copy) package
            data = tar.extractfile(member).read()
            stem = member.name[: -len(".pb")]
            kind = stem.rsplit("_", 1)[1]
            if kind == "1":
                spec = task_pb2.TaskSpec.FromString(data)
                reg.tasks[spec.template.id.name] = spec.template
            elif kind == "2":
                spec = workflow_pb2.WorkflowSpec.FromString(data)
                reg.workflows[spec.template.id.name] = spec
            elif kind == "3":
                lp = launch_plan_pb2.LaunchPlan.FromString(data)
                reg.launch_plans[lp.id.name] = lp
    return reg


def custom(template: tasks_pb2.TaskTemplate) -> Dict[str, Any]:
    return MessageToDict(template.custom)
