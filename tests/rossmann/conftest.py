"""Shared fixtures: one local Spark session for all rossmann tests, small synthetic datasets, prepared data."""

from __future__ import annotations

from pathlib import Path

import pytest

from rossmann.data import RawData, load
from rossmann.synthetic import SyntheticReport, generate
from tests.support.prepared import make_prepared
from tests.support.spark import local_spark


@pytest.fixture(scope="session")
def spark():
    """The session a local run of the workflow's `prepare` task gets (tests.support.spark)."""
    session = local_spark("rossmann-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A small prepared-data directory written by hand to prepare()'s contract (tests.support.prepared): differs from
    the prepare task's (fewer columns, a known signal) so that training and prediction are tested in seconds."""
    return make_prepared(tmp_path_factory.mktemp("prepared"))


@pytest.fixture(scope="session")
def small_data(tmp_path_factory) -> SyntheticReport:
    """20 stores, train 2014-01-01..2015-07-31, 48 test days: the end-to-end dataset."""
    return generate(str(tmp_path_factory.mktemp("small")), n_stores=20, start="2014-01-01", end="2015-07-31")


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> SyntheticReport:
    """4 stores, train 2014-07-15..2015-07-31, 20 test days: quick to load and prepare."""
    return generate(str(tmp_path_factory.mktemp("tiny")), n_stores=4, start="2014-07-15", end="2015-07-31",
                    test_days=20)


@pytest.fixture(scope="module")
def tiny_raw(spark, tiny_data) -> RawData:
    """tiny_data loaded (and cached) once per module (released before other modules may stop the session)."""
    raw = load(spark, tiny_data.out_dir)
    yield raw
    raw.unpersist()
