"""``map_task`` over Horovod tasks, as flytepropeller v1.16.8 runs an ArrayNode (``tests/cluster/propeller.py``,
flyteorg/flyte 51877f89, ``flytepropeller/pkg/controller/nodes/array/``).

Each element of a ``map_task`` over an ``MPIJob`` task is its own node of the ``mpi`` plugin (``handler.go``
``buildArrayNodeContext`` mocks the k8s plugin state, "works for all k8s plugins"), so its own MPIJob, whose launcher
and worker pods carry ``FLYTE_K8S_ARRAY_INDEX``; ``{{.input}}`` is the ArrayNode's inputs file, lists and all. The
registered launcher command is run here for one element with that environment: every rank must read that element,
and rank 0 writes its output. A ``map_task`` over a ``HorovodSpark`` task cannot run and is refused.

``cache``, ``retries``, ``timeout``, ``pod_template`` and ``ImageSpec`` are read by propeller from the task's metadata
and its primary container whatever the plugin (``nodes/task/cache.go`` ``IsCacheable``; ``compiler/transformers/k8s/
node.go`` ``computeDeadline``; ``nodes/executor.go`` timeouts and ``isEligibleForRetry``; ``flytek8s/pod_helper.go``
``BuildRawPod``): each must reach the template of both task types without changing the command the pods run.
"""

import datetime
import json
import sys
import typing
from collections import OrderedDict

import pytest
from flytekit import ImageSpec, PodTemplate, dynamic, map_task, task, workflow
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable

from flytekitplugins.horovod import HorovodConfigError, HorovodJob, HorovodSpark, MPIJob, Worker
from tests.cluster import map_flow
from tests.cluster.backend import Attempt, mpi_launcher, value
from tests.cluster.contract import launcher_args
from tests.cluster.propeller import array_element_env, array_element_input, mpi_job, primary_container
from tests.cluster.registration import custom

SETTINGS = SerializationSettings(image_config=ImageConfig.auto_default_image(), project="p", domain="d", version="v",
                                 python_interpreter=sys.executable)  # entrypoint paths that exist here


CONFIGS = {"MPIJob": MPIJob(worker=Worker(replicas=2), slots=2), "HorovodJob": HorovodJob(worker=Worker(replicas=2)),
           "HorovodSpark": HorovodSpark(num_proc=2)}


def _template(config, **task_args):
    def body(x: int) -> int:
        return x

    return get_serializable(OrderedDict(), SETTINGS, task(task_config=config, **task_args)(body)).template.to_flyte_idl()


def _registered(workflow_entity):
    """The workflow's nodes and task templates as ``pyflyte package`` writes them (flytekit's translator)."""
    entities = OrderedDict()
    spec = get_serializable(entities, SETTINGS, workflow_entity)
    templates = [v.template.to_flyte_idl() for v in entities.values() if type(v).__name__ == "TaskSpec"]
    return spec.template.to_flyte_idl(), templates


def test_each_map_task_element_is_an_mpijob_whose_ranks_all_read_that_element(tmp_path):
    workflow_template, (template,) = _registered(map_flow.map_wf)
    (node,) = workflow_template.nodes
    assert node.HasField("array_node") and node.array_node.node.task_node.reference_id.name == template.id.name
    assert (template.type, template.task_type_version) == ("mpi", 1)  # the mpi plugin builds each element's MPIJob
    job = mpi_job(template)
    assert (job.worker_replicas, job.slots_per_worker, job.launcher_args) == (1, 1, None)
    command = launcher_args(template.id.name, list(template.container.args), slots=2)
    assert command[0] == "horovodrun" and "pyflyte-map-execute" in command

    xs, index = [1.0, 10.0, 100.0], 1
    attempt, markers = Attempt(tmp_path / "attempt"), tmp_path / "markers"
    attempt.write_inputs(template, {"x": xs})  # the ArrayNode's inputs file: {{.input}} of every element
    ran = mpi_launcher(template, attempt, tmp_path,
                       extra_env={**array_element_env(index), "MAP_FLOW_MARKERS": str(markers)})
    assert ran.returncode == 0 and attempt.error_files() == [], ran.output[-4000:]
    seen = {p.stem: json.loads(p.read_text()) for p in markers.glob("rank-*.json")}
    element = array_element_input({"x": xs}, index)["x"]
    assert seen == {f"rank-{r}": {"x": element, "index": str(index)} for r in (0, 1)}, ran.output[-4000:]
    # the element's output (arrayTaskReader: the element type, not the list), written by rank 0 only
    assert {k: value(v) for k, v in attempt.outputs().items()} == {"o0": element * (1 + 2)}


def test_each_element_of_a_map_task_over_a_horovod_job_is_an_elastic_mpijob_running_the_map_entrypoint():
    _, (template,) = _registered(map_flow.elastic_map_wf)
    assert (template.type, mpi_job(template).worker_replicas) == ("mpi", 2)
    command = launcher_args(template.id.name, list(template.container.args), slots=1)
    assert command[0] == "horovodrun" and "--host-discovery-script" in command
    assert command.index("pyflyte-map-execute") > command.index("--host-discovery-script")


def test_map_task_over_a_horovod_spark_task_is_refused_when_serialized_and_when_run():
    @task(task_config=HorovodSpark(num_proc=2))
    def spark_element(x: float) -> float:
        return x

    @workflow
    def spark_map(xs: typing.List[float]) -> typing.List[float]:
        return map_task(spark_element)(x=xs)

    refused = r"map_task over .*spark_element \(a HorovodSpark task\) cannot run: .* without the task's pre_execute"
    with pytest.raises(HorovodConfigError, match=refused):
        _registered(spark_map)
    with pytest.raises(HorovodConfigError, match=refused):
        map_task(spark_element)(x=[1.0])  # a local run fails before any Spark session or rank starts


@pytest.mark.parametrize("config", [MPIJob(worker=Worker(replicas=2)), HorovodJob(worker=Worker(replicas=2)),
                                    HorovodSpark(num_proc=2)], ids=["MPIJob", "HorovodJob", "HorovodSpark"])
def test_dynamic_with_a_horovod_config_is_refused_when_declared(config):
    def body(x: int) -> int:
        return x

    with pytest.raises(HorovodConfigError, match=r"@dynamic .* not supported: .* call it from a plain @dynamic"):
        dynamic(task_config=config)(body)


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_cache_retries_timeout_and_image_spec_reach_propeller_with_the_same_command(kind):
    plain = _template(CONFIGS[kind])
    image = ImageSpec(name="my-horovod-task", registry="ghcr.io/me", packages=["my-package==1.0"])
    template = _template(CONFIGS[kind], cache=True, cache_version="1", retries=3,
                         timeout=datetime.timedelta(minutes=30), container_image=image)
    meta = template.metadata
    assert (meta.discoverable, meta.discovery_version, meta.retries.retries, meta.timeout.seconds) == (True, "1", 3, 1800)
    assert template.type == plain.type
    if template.type == "mpi":
        assert template.custom == plain.custom
    else:  # flytekitplugins-spark points an ImageSpec's Spark job at flytekit's Spark image's paths
        assert (custom(template)["executorPath"], custom(template)["mainApplicationFile"]) == (
            "/usr/bin/python3", "local:///usr/local/bin/entrypoint.py")
    primary = primary_container(template)
    assert primary["args"] == list(plain.container.args), kind  # the launcher / driver command is unchanged
    assert primary["image"].startswith("ghcr.io/me/my-horovod-task:")  # the spec's (Spark: on flytekit's Spark base)


def test_an_image_spec_for_a_horovod_spark_task_keeps_the_paths_the_config_names():
    paths = {"executor_path": "/opt/venv/bin/python3", "applications_path": "local:///opt/venv/bin/entrypoint.py"}
    template = _template(HorovodSpark(num_proc=2, **paths),
                         container_image=ImageSpec(name="mine", registry="ghcr.io/me", base_image="ghcr.io/me/base:1"))
    assert (custom(template)["executorPath"], custom(template)["mainApplicationFile"]) == tuple(paths.values())


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_a_pod_template_keeps_the_command_in_the_primary_container(kind):
    pytest.importorskip("kubernetes", reason="flytekit's PodTemplate needs the kubernetes package")
    plain = _template(CONFIGS[kind])
    template = _template(CONFIGS[kind], pod_template=PodTemplate(primary_container_name="main", labels={"team": "ml"}))
    assert template.HasField("k8s_pod") and template.k8s_pod.metadata.labels["team"] == "ml"
    assert primary_container(template)["args"] == list(plain.container.args), kind
    if template.type == "mpi":
        assert mpi_job(template).launcher_args is None  # the launcher runs the task's command, as without it
