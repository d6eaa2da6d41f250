"""Registration: the specs ``pyflyte package`` writes are what Flyte's ``spark`` and ``mpi`` backend plugins and the
operators need, for the cluster-path test flows and for ``workflows/rossmann.py``; a wrong config fails the checks."""

import copy
import os

import pytest

from tests.cluster import contract as c
from tests.cluster.registration import IMAGE, VENV_PYTHON, package

FLOWS = "tests.cluster.flows.cluster_flows"
ENTRYPOINT = os.path.join(os.path.dirname(os.path.dirname(VENV_PYTHON)), "bin", "entrypoint.py")

# The design of the test flows (tests/cluster/flows/cluster_flows.py), written out independently of the code.
FLOWS_DESIGN = {
    "allreduce_mpi": c.MpiRoute(workers=2, slots=1, launcher="mpirun"),
    "allreduce_gloo": c.MpiRoute(workers=1, slots=2, launcher="horovodrun"),
    "spark_allreduce": c.SparkRoute(spark_conf={"spark.sql.shuffle.partitions": "4"}, ranks=2),
    "report": c.Python(),
    "rank_one_fails": c.MpiRoute(workers=2, slots=1, launcher="mpirun"),
    "rank_one_killed_mpi": c.MpiRoute(workers=2, slots=1, launcher="mpirun"),
    "rank_one_killed_gloo": c.MpiRoute(workers=1, slots=2, launcher="horovodrun"),
    "out_of_step_mpi": c.MpiRoute(workers=2, slots=1, launcher="mpirun"),
    "out_of_step_gloo": c.MpiRoute(workers=1, slots=2, launcher="horovodrun"),
    "waits_to_be_stopped": c.MpiRoute(workers=1, slots=2, launcher="horovodrun"),
    "spark_rank_fails": c.SparkRoute(spark_conf={"spark.sql.shuffle.partitions": "4"}, ranks=2),
    "elastic_allreduce": c.ElasticRoute(workers=2, min_workers=1, max_workers=2),
    "wedges_mpirun": c.MpiRoute(workers=2, slots=1, launcher="mpirun"),
}


def test_serialized_paths_are_real_here():
    """Packaged for this venv's interpreter, the entrypoint in every command exists, so the commands can run here."""
    assert os.path.isfile(ENTRYPOINT), ENTRYPOINT
    with open(ENTRYPOINT) as f:
        assert "pyflyte-execute" in f.read()  # flytekit's bin/entrypoint.py


def test_flows_tasks_are_what_the_operators_run(flows_registration):
    reg = flows_registration
    assert sorted(reg.tasks) == sorted(f"{FLOWS}.{name}" for name in FLOWS_DESIGN)
    for name, expected in FLOWS_DESIGN.items():
        template = reg.task(f"{FLOWS}.{name}")
        assert template.container.image == IMAGE
        c.check_task(template, expected, VENV_PYTHON)


def test_flows_workflow_edges_and_directory_outputs(flows_registration):
    reg = flows_registration
    wf_in = {"scale": ("", "scale"), "marker_dir": ("", "marker_dir")}
    c.check_edges(reg.workflow(f"{FLOWS}.cluster_wf"), {
        "allreduce_mpi": wf_in,
        "spark_allreduce": wf_in,
        "report": {"mpi_model": ("allreduce_mpi", "model"), "spark_model": ("spark_allreduce", "model")},
        "outputs": {"o0": ("report", "o0"), "o1": ("allreduce_mpi", "model")},
    })
    c.check_edges(reg.workflow(f"{FLOWS}.gloo_wf"), {"allreduce_gloo": wf_in, "outputs": {"o0": ("allreduce_gloo", "total")}})
    for name in ("allreduce_mpi", "allreduce_gloo", "spark_allreduce"):
        c.check_directory_outputs(name, reg.task(f"{FLOWS}.{name}").interface, ["model"])
    c.check_directory_outputs("cluster_wf", reg.workflow(f"{FLOWS}.cluster_wf").template.interface, ["o1"])
    for name in ("cluster_wf", "gloo_wf"):
        c.check_no_required_inputs(reg.launch_plans[f"{FLOWS}.{name}"])


# ---------------------------------------------------------------- the checks fail when the config is wrong
def test_a_wrong_config_fails_registration_checks(tmp_path):
    """Package the flows with a deliberately wrong config (3 MPI ranks; the Spark task without its Spark config)."""
    reg = package("tests.cluster.flows", tmp_path, env={"CLUSTER_FLOWS_BREAK": "ranks,task_type"})
    with pytest.raises(AssertionError, match=r"workerReplicas.replicas=3, slots=1; the design needs 2 worker pods"):
        c.check_task(reg.task(f"{FLOWS}.allreduce_mpi"), FLOWS_DESIGN["allreduce_mpi"], VENV_PYTHON)
    with pytest.raises(AssertionError, match=r"task type 'python-task', the design needs 'spark'"):
        c.check_task(reg.task(f"{FLOWS}.spark_allreduce"), FLOWS_DESIGN["spark_allreduce"], VENV_PYTHON)
    for name in ("allreduce_gloo", "report"):  # the tasks left alone still pass
        c.check_task(reg.task(f"{FLOWS}.{name}"), FLOWS_DESIGN[name], VENV_PYTHON)


def _args_with(template, old, new):
    args = list(template.container.args)
    args[args.index(old)] = new
    del template.container.args[:]
    template.container.args.extend(args)


def _np_index(template):
    return list(template.container.args).index("-np") + 1


@pytest.mark.parametrize("task, breakage, message", [
    ("allreduce_mpi", lambda t: setattr(t, "type", "python-task"), r"task type 'python-task', the design needs 'mpi'"),
    ("allreduce_mpi", lambda t: t.container.args.__setitem__(_np_index(t), "4"), r"launcher starts -np 4"),
    ("allreduce_gloo", lambda t: t.container.args.__setitem__(_np_index(t), "1"), r"launcher starts -np 1"),
    ("allreduce_gloo", lambda t: t.custom.fields["slots"].__setattr__("number_value", 4), r"slots=4"),
    ("allreduce_gloo", lambda t: _args_with(t, "--gloo", "--mpi"), r"horovodrun without --gloo"),
    ("allreduce_gloo", lambda t: t.container.args.__setitem__(4, "1"), r"must start with .*cluster_launcher --slots 2"),
    ("elastic_allreduce", lambda t: t.container.args.__delitem__(slice(0, 6)), r"must start with .*cluster_launcher"),
    ("allreduce_mpi", lambda t: _args_with(t, ENTRYPOINT, "/opt/venv/bin/entrypoint.py"), r"ranks run '/opt/venv"),
    ("spark_allreduce", lambda t: setattr(t, "type", "mpi"), r"task type 'mpi', the design needs 'spark'"),
    ("spark_allreduce", lambda t: t.custom.fields["sparkConf"].struct_value.fields["spark.executor.instances"]
     .__setattr__("string_value", "1"), r"gives 1 executor task slots .* Horovod needs 2"),
    ("spark_allreduce", lambda t: t.custom.fields["mainApplicationFile"].__setattr__("string_value", "local:///x.py"),
     r"mainApplicationFile 'local:///x.py'"),
    ("report", lambda t: t.container.command.append("python"), r"container.command must be empty"),
])
def test_each_check_catches_its_own_breakage(flows_registration, task, breakage, message):
    template = copy.deepcopy(flows_registration.task(f"{FLOWS}.{task}"))
    c.check_task(template, FLOWS_DESIGN[task], VENV_PYTHON)  # passes before the breakage
    breakage(template)
    with pytest.raises(AssertionError, match=message):
        c.check_task(template, FLOWS_DESIGN[task], VENV_PYTHON)


def test_edges_check_catches_a_wrong_edge(flows_registration):
    spec = copy.deepcopy(flows_registration.workflow(f"{FLOWS}.cluster_wf"))
    report = next(n for n in spec.template.nodes if n.task_node.reference_id.name.endswith(".report"))
    mpi_node = next(n.id for n in spec.template.nodes if n.task_node.reference_id.name.endswith(".allreduce_mpi"))
    for binding in report.inputs:
        if binding.var == "spark_model":
            binding.binding.promise.node_id = mpi_node  # both inputs from the MPI task now
    with pytest.raises(AssertionError, match="upstream .* != nodes its inputs come from"):
        c.edges(spec)


def test_fast_registration_unpacks_code_only_in_the_launcher(tmp_path):
    """Why docs/deploy.md says: register MPI-route tasks non-fast. Fast registration wraps the LAUNCHER's command in
    pyflyte-fast-execute; the ranks (in the worker pods) run plain pyflyte-execute on the image's code."""
    reg = package("tests.cluster.flows", tmp_path, "--copy", "all", python="")
    args = list(reg.task(f"{FLOWS}.allreduce_mpi").container.args)
    assert args[:6] == ["pyflyte-fast-execute", "--additional-distribution", "{{ .remote_package_path }}",
                        "--dest-dir", "/root", "--"]
    launcher = c.launcher_args("allreduce_mpi", args[6:], slots=1)
    assert launcher[0] == "mpirun"
    per_rank = launcher[launcher.index("python") + 1:]
    assert per_rank[0] == "/opt/venv/bin/entrypoint.py" and per_rank[1] == "pyflyte-execute"
    assert "pyflyte-fast-execute" not in per_rank


def test_with_a_pod_template_fast_registration_prefixes_each_rank_not_the_launcher(flows_registration):
    """Why docs/deploy.md says a pod template changes fast registration: flytekit's translator builds a pod task's
    command through ``set_command_fn(_fast_serialize_command_fn(...))`` (``translator.py``, ``get_serializable_task``),
    and the MPI tasks apply that function only to the per-rank command (kfmpi's ``_get_base_command``)."""
    from flytekit.configuration import FastSerializationSettings, ImageConfig, SerializationSettings
    from flytekit.tools.translator import _fast_serialize_command_fn

    from tests.cluster.flows import cluster_flows

    settings = SerializationSettings(
        image_config=ImageConfig.auto_default_image(), project="p", domain="d", version="v",
        fast_serialization_settings=FastSerializationSettings(enabled=True, destination_dir="/root",
                                                              distribution_location="s3://bucket/code.tgz"))
    task = cluster_flows.allreduce_mpi
    task.set_command_fn(_fast_serialize_command_fn(settings, task))
    try:
        args = task.get_command(settings)
    finally:
        task.reset_command_fn()
    launcher = c.launcher_args("allreduce_mpi", args, slots=1)  # no pyflyte-fast-execute before the launcher
    assert launcher[0] == "mpirun"
    per_rank = launcher[launcher.index("python") + 2:]
    assert per_rank[:6] == ["pyflyte-fast-execute", "--additional-distribution", "s3://bucket/code.tgz", "--dest-dir",
                            "/root", "--"] and per_rank[6] == "pyflyte-execute", per_rank


# ---------------------------------------------------------------- workflows/rossmann.py
ROSSMANN = "workflows.rossmann"
ROSSMANN_RANKS = 2  # the design's default: 2 Horovod ranks in both training tasks


def _rossmann_design():
    from workflows import rossmann as r

    def mpi_route(task) -> c.MpiRoute:
        controller = task.task_config.horovod.controller
        return c.MpiRoute(workers=ROSSMANN_RANKS, slots=1, launcher="mpirun" if controller == "mpi" else "horovodrun")

    return {
        "get_data": c.Python(),
        "prepare": c.SparkRoute(spark_conf=dict(r.prepare.task_config.spark_conf)),
        "train": c.SparkRoute(spark_conf=dict(r.train.task_config.spark_conf), ranks=ROSSMANN_RANKS),
        "train_mpi": mpi_route(r.train_mpi),
        "train_torch": mpi_route(r.train_torch),  # the PyTorch model, on the MPI route
        "predict": c.Python(),
    }


def test_rossmann_tasks_are_what_the_operators_run(rossmann):
    design = _rossmann_design()
    assert sorted(rossmann.tasks) == sorted(f"{ROSSMANN}.{name}" for name in design)
    for name, expected in design.items():
        template = rossmann.task(f"{ROSSMANN}.{name}")
        c.check_task(template, expected, VENV_PYTHON)
        c.check_directory_outputs(name, template.interface, ["o0"])  # every step's output is a FlyteDirectory


@pytest.mark.parametrize("workflow, trainer", [("wf", "train"), ("wf_mpi", "train_mpi")])
def test_rossmann_workflow_edges_and_outputs(rossmann, workflow, trainer):
    spec = rossmann.workflow(f"{ROSSMANN}.{workflow}")
    hp = ("", "hp")
    c.check_edges(spec, {
        "get_data": {"data_dir": ("", "data_dir"), "hp": hp},
        "prepare": {"data": ("get_data", "o0"), "hp": hp},
        trainer: {"prepared": ("prepare", "o0"), "hp": hp},
        "predict": {"prepared": ("prepare", "o0"), "model": (trainer, "o0")},
        "outputs": {"model": (trainer, "o0"), "predictions": ("predict", "o0")},
    })
    c.check_directory_outputs(workflow, spec.template.interface, ["model", "predictions"])
    c.check_no_required_inputs(rossmann.launch_plans[f"{ROSSMANN}.{workflow}"])  # runs with no arguments
