"""Session fixtures: the specs ``pyflyte package`` writes, made once and shared by the cluster-path tests."""

import pytest

from tests.cluster.registration import package

FLOWS = "tests.cluster.flows"


@pytest.fixture(scope="session")
def flows_registration(tmp_path_factory):
    """``pyflyte --pkgs tests.cluster.flows package`` for this venv's interpreter (real entrypoint paths)."""
    return package(FLOWS, tmp_path_factory.mktemp("package-flows"))


@pytest.fixture(scope="session")
def rossmann(tmp_path_factory):
    """``pyflyte --pkgs workflows package``: the Rossmann workflows as a user registers them."""
    return package("workflows", tmp_path_factory.mktemp("package-rossmann"))
