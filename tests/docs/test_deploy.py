"""The Helm values docs/deploy.md tells users to install keep the points checked upstream (issue 13, item 5).

Upstream facts cannot be read here (no cluster, no chart); each one below names the source and version it was read
from, as deploy.md does. The values files are the page's own ``file`` blocks.
"""

import pytest
import yaml

from tests.docs.markdown import ROOT, parse

FILES = parse(ROOT / "docs" / "deploy.md").files()
CRUD = {"create", "delete", "get", "list", "patch", "update", "watch"}  # what propeller does with its resources


def values(name: str) -> dict:
    assert name in FILES, f"docs/deploy.md has no file block {name}; it has {sorted(FILES)}"
    return yaml.safe_load(FILES[name])


def test_flyte_binary_values_keep_the_default_plugins_and_add_spark_and_mpi():
    plugins = values("flyte-binary-values.yaml")["enabled_plugins"]["tasks"]["task-plugins"]
    chart_default = {"container", "sidecar", "k8s-array", "connector-service", "echo"}  # flyte-binary values.yaml, v1.16.8
    assert chart_default | {"spark", "mpi"} <= set(plugins["enabled-plugins"])
    assert plugins["default-for-task-types"] == {"spark": "spark", "mpi": "mpi"}


@pytest.mark.parametrize("group, resource", [("sparkoperator.k8s.io", "sparkapplications"), ("kubeflow.org", "mpijobs")])
def test_flyte_binary_rbac_lets_flyte_manage_the_custom_resources(group, resource):
    rules = values("flyte-binary-values.yaml")["rbac"]["extraRules"]  # flyte-binary's ClusterRole has none (v1.16.8)
    granted = set().union(*[set(r["verbs"]) for r in rules if group in r["apiGroups"] and resource in r["resources"]])
    assert CRUD <= granted, f"{group}/{resource}: {sorted(granted)}"


def test_spark_operator_watches_more_than_the_default_namespace_and_creates_the_spark_account():
    spark = values("spark-operator-values.yaml")["spark"]
    assert spark["jobNamespaces"] != ["default"]  # the chart's default (2.0.0 to 2.5.2): Flyte's namespaces unseen
    assert spark["serviceAccount"]["name"] == "spark"  # Flyte's spark plugin: the execution's account, else "spark"


def test_flyte_core_values_put_the_spark_defaults_where_the_chart_renders_them():
    """flyte-core (v1.16.8, ``templates/propeller/configmap.yaml``) renders ``sparkoperator.plugin_config`` into
    propeller's ``spark.yaml`` only with ``sparkoperator.enabled``; Spark defaults anywhere else are dropped."""
    core = values("flyte-core-values.yaml")
    plugins = core["configmap"]["enabled_plugins"]["tasks"]["task-plugins"]
    chart_default = {"container", "sidecar", "k8s-array", "connector-service", "echo"}  # flyte-core values.yaml
    assert chart_default | {"spark", "mpi"} <= set(plugins["enabled-plugins"])
    assert plugins["default-for-task-types"] == {"spark": "spark", "mpi": "mpi"}
    assert core["sparkoperator"]["enabled"] is True
    assert core["sparkoperator"]["plugin_config"]["plugins"]["spark"]["spark-config-default"]
    assert set(core) == {"configmap", "sparkoperator"}  # no Spark defaults under a key the chart ignores
