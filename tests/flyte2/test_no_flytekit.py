"""The Flyte 2 plugin imports and runs its ranks where flytekit cannot be imported: a ``sitecustomize`` on
PYTHONPATH puts a meta-path finder that refuses ``flytekit`` first, in the ``flyte.run`` process and (PYTHONPATH goes
to them) in every rank, for an ``MPIJob``, an elastic ``HorovodJob`` and a ``HorovodSpark`` task (its ranks are Spark
tasks)."""

import sys

import pytest

from tests.support import ROOT, leftovers, run_command
from tests.support.no_flytekit import NO_FLYTEKIT

pytestmark = pytest.mark.needs_framework("pytorch")
pytest.importorskip("flyteplugins.horovod", reason="flyteplugins-horovod (and the flyte SDK) is not installed here")

RUN = """
import sys

import flyte

try:
    import flytekit
except ImportError as exc:
    print("blocked:", exc)

from tests.flyte2.flows import allreduce as flows
from tests.flyte2.flows import spark_route

flyte.init()
print("result:", flyte.run(flows.flytekit_loaded, x=1.0).outputs()[0])
print("elastic:", flyte.run(flows.elastic_steps, steps=3).outputs()[0])
print("spark:", flyte.run(spark_route.spark_allreduce, x=1.0).outputs()[0])
print("flytekit here:", " ".join(n for n in sys.modules if n.split(".")[0] == "flytekit") or "none")
"""


def test_the_plugin_runs_two_ranks_with_flytekit_unimportable(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(NO_FLYTEKIT)
    ran = run_command([sys.executable, "-c", RUN], cwd=ROOT, timeout=300,
                      env={"PYTHONPATH": f"{tmp_path}:{ROOT}"})
    assert ran.returncode == 0, ran.output[-3000:]
    assert "blocked: flytekit: flytekit is not installed here" in ran.output
    assert "result: rank 0 of 2: 3.0; flytekit in the rank: none" in ran.output, ran.output[-3000:]
    assert "elastic: rank 0 of 2: 6.0" in ran.output, ran.output[-3000:]  # HorovodJob: horovodrun's elastic job
    assert "spark: rank 0 of 2: 3.0 | rank 0 of 2: 3.0 | 2 slots" in ran.output, ran.output[-3000:]  # HorovodSpark
    assert "flytekit here: none" in ran.output
    assert leftovers(ran.marker) == []


def test_installing_the_plugin_brings_no_flytekit():
    """The requirements of the installed Flyte 2 plugin, followed through every installed distribution they name
    (the `spark` extra included), never reach flytekit: the runtime is a distribution of its own, not the v1 plugin's.
    Only the `migrate` extra brings flytekit, through flyte-migrate itself, which runs v1 files with it."""
    from importlib import metadata

    from packaging.requirements import Requirement

    def needs(name: str, extras: frozenset) -> set:
        found = set()
        for text in metadata.requires(name) or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras or {""}):
                found.add((req.name.lower().replace("_", "-"), frozenset(req.extras)))
        return found

    seen, todo = set(), [("flyteplugins-horovod", frozenset({"spark"}))]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            todo += needs(name, extras)
        except metadata.PackageNotFoundError:  # an optional requirement this environment does not install
            pass
    names = {name for name, _ in seen}
    assert "horovod-flyte-runtime" in names and "flyte" in names
    assert not {name for name in names if name.startswith("flytekit")}, sorted(names)
    assert ("flyte-migrate", frozenset()) in needs("flyteplugins-horovod", frozenset({"migrate"}))
    assert ("flytekit", frozenset()) in needs("flyte-migrate", frozenset())
