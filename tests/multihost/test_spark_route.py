"""The Spark route on a real Spark standalone cluster: Master in host a, one single-core Worker in each of b and c.

The registered Spark-route task runs through the Spark driver entrypoint (``tests/cluster/backend.py``
``spark_driver``) in host a with ``--master spark://a:7077``, as the driver pod runs it; the Horovod ranks run as
Spark tasks, one on each worker host.
"""

import os

import pytest

from tests.cluster.backend import Attempt, spark_driver, value
from tests.cluster.registration import package
from tests.multihost.checks import assert_ranks_across_hosts, rank_markers
from tests.multihost.conftest import FLOWS, run_driver
from tests.multihost.flows.multihost_flows import PAYLOAD
from tests.multihost.observe import Observer

pytestmark = [pytest.mark.multihost, pytest.mark.slow]


def test_run_api_and_horovod_runner_put_one_rank_on_each_worker(network, registration, spark_cluster, tmp_path):
    template = registration.task(f"{FLOWS}.spark_worlds")
    attempt = Attempt(tmp_path / "attempt")
    markers = tmp_path / "markers"
    attempt.write_inputs(template, {"marker_dir": str(markers)})

    with Observer(network.hosts) as seen:
        ran = run_driver(template, attempt, tmp_path, network, spark_cluster)
    assert ran.returncode == 0, ran.output[-6000:]
    outputs = {k: value(v) for k, v in attempt.outputs().items()}
    assert outputs == {"run_api": [3.0, 3.0], "runner": 3.0, "master": spark_cluster.url}

    jobs = assert_ranks_across_hosts(seen, network, 2, ["b", "c"], rendezvous="a", controller="gloo",
                                     payload_bytes=PAYLOAD * 4, jobs=2)
    for api in ("run-api", "runner"):
        marks = rank_markers(markers / api)
        assert sorted(marks) == [0, 1], api
        names = {marks[r]["hostname"] for r in (0, 1)}
        assert names == {network["b"].name, network["c"].name}, (api, names)
        assert all(marks[r]["hosts"] == [marks[0]["hostname"], marks[1]["hostname"]] for r in (0, 1))
    assert all(sorted(hosts.values()) == ["b", "c"] for hosts in jobs)


@pytest.fixture(scope="module")
def rossmann_train(tmp_path_factory):
    """``workflows/rossmann.py``'s ``train`` task as ``pyflyte package`` registers it."""
    return package("workflows", tmp_path_factory.mktemp("package-rossmann")).task("workflows.rossmann.train")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    from tests.rossmann._fixtures import make_prepared

    return make_prepared(tmp_path_factory.mktemp("prepared"), stores=8, train_days=90)


def _layout(model_dir: str) -> dict:
    """The model directory's files and the keys of its metrics and history."""
    import json

    files = sorted(os.path.relpath(os.path.join(d, f), model_dir) for d, _, fs in os.walk(model_dir) for f in fs)
    with open(os.path.join(model_dir, "metrics.json")) as f:
        metrics = json.load(f)
    with open(os.path.join(model_dir, "history.json")) as f:
        history = json.load(f)
    return {"files": files, "metrics": sorted(metrics), "history": sorted(history), "ranks": metrics["ranks"],
            "epochs": metrics["epochs"], "route": metrics["route"]}


def test_rossmann_train_on_the_cluster_writes_what_a_local_run_writes(network, spark_cluster, rossmann_train,
                                                                       prepared, tmp_path):
    from flytekit.types.directory import FlyteDirectory

    from workflows.rossmann import Hyperparameters

    inputs = {"prepared": FlyteDirectory(str(prepared)), "hp": Hyperparameters(epochs=1, hidden=[32, 16])}
    layouts = {}
    for where in ("local", "cluster"):
        attempt = Attempt(tmp_path / where)
        attempt.write_inputs(rossmann_train, inputs)
        if where == "local":  # the same registered task with --master local[2], outside the hosts
            ran = spark_driver(rossmann_train, attempt, tmp_path / where, master="local[2]", timeout=300)
        else:
            with Observer(network.hosts) as seen:
                ran = run_driver(rossmann_train, attempt, tmp_path / where, network, spark_cluster)
        assert ran.returncode == 0, f"{where}:\n{ran.output[-6000:]}"
        model = value(attempt.outputs()["o0"])
        layouts[where] = _layout(model)
    assert layouts["cluster"] == layouts["local"]
    assert layouts["cluster"]["ranks"] == 2 and layouts["cluster"]["route"] == "spark-estimator"

    variables = [f for f in layouts["cluster"]["files"] if f.startswith("model/variables/variables.data")]
    weights = sum(os.path.getsize(os.path.join(model, f)) for f in variables)  # every step allreduces gradients
    assert_ranks_across_hosts(seen, network, 2, ["b", "c"], rendezvous="a", controller="gloo", payload_bytes=weights)
