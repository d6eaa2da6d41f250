"""kfmpi's deprecated fields (``num_workers``, ``num_launcher_replicas``: [DEPRECATED] in flytekitplugins-kfmpi's
docstrings) still work, and warn once per process with what replaces them; never from a rank."""

import warnings

import pytest

from flytekitplugins.horovod import HorovodJob, Launcher, MPIJob, Worker
from flytekitplugins.horovod import mpi as mpi_module


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    monkeypatch.setattr(mpi_module, "_warned", set())
    for name in ("OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)


def _caught(declare):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        declare()
    return [(w.category, str(w.message), w.filename) for w in caught]


def test_each_deprecated_field_warns_once_naming_its_replacement_at_the_declaration():
    seen = _caught(lambda: [MPIJob(num_workers=2, num_launcher_replicas=1), MPIJob(num_workers=3),
                            HorovodJob(num_workers=2)])
    assert seen == [
        (FutureWarning, "MPIJob(num_workers=2) is deprecated, as in flytekitplugins-kfmpi: use "
                        "worker=Worker(replicas=2) (the same pods, serialized the same way)", __file__),
        (FutureWarning, "MPIJob(num_launcher_replicas=1) is deprecated, as in flytekitplugins-kfmpi: use "
                        "launcher=Launcher(replicas=1) (the same pods, serialized the same way)", __file__)]
    assert MPIJob(num_workers=2).num_ranks == 2  # still works


def test_the_current_fields_and_ranks_do_not_warn(monkeypatch):
    assert _caught(lambda: MPIJob(worker=Worker(replicas=2), launcher=Launcher(replicas=1), slots=2)) == []
    monkeypatch.setenv("HOROVOD_RANK", "1")  # a rank importing the task's module again
    assert _caught(lambda: MPIJob(num_workers=2)) == []
