"""Fast checks of the benchmark scripts (the benchmarks themselves run with ``make bench``)."""

import datetime as dt
import json
import re
import subprocess
import sys

import pytest

from tests.support import ROOT

SCRIPTS = ["launch", "prep", "predict", "train_scale", "floor", "recipe", "phases", "steps", "full_size", "growth",
           "reference", "vs_ddp", "horovod_knobs", "step_exchange", "vs_mwms", "driver_start", "first_epoch", "rank_gc"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_starts_and_has_a_quick_mode(name):
    out = subprocess.run([sys.executable, "-m", f"bench.{name}", "--help"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=60)
    assert out.returncode == 0, out.stdout
    assert "--quick" in out.stdout


def test_a_recipe_variant_is_parsed_and_a_bad_one_refused_naming_the_setting():
    from bench.recipe import parse_variant

    assert parse_variant("l2=5e-4,epochs=30") == {"l2": 5e-4, "epochs": 30}
    for bad, says in (("epoch=3", "unknown setting 'epoch' (known: l2, epochs, dropout)"),
                      ("epochs=3.5", "epochs='3.5': must be a whole number >= 1"),
                      ("epochs=0", "epochs='0': must be a whole number >= 1"),
                      ("l2=-1", "l2='-1': must be a number >= 0")):
        with pytest.raises(SystemExit, match=re.escape(says)):
            parse_variant(bad)


def test_table_and_round_robin():
    from bench._common import round_robin, table

    calls = []
    samples = round_robin({"a": lambda: calls.append("a") or 1.0, "b": lambda: calls.append("b") or 2.0}, 2,
                          log=lambda _: None)
    assert calls == ["a", "b", "a", "b"] and samples == {"a": [1.0, 1.0], "b": [2.0, 2.0]}
    assert table(["x", "y"], [[1, "long"]]).splitlines() == ["| x | y    |", "|---|------|", "| 1 | long |"]


@pytest.fixture(scope="module")
def spark():
    """The benchmarks' session; differs in 2 shuffle partitions, as the test's DataFrame has 30 rows."""
    from bench._common import spark_session

    session = spark_session(spark_sql_shuffle_partitions="2")
    yield session
    session.stop()


def test_reference_counters_equal_ours(spark):
    """The reference approach's Python counters (bench/_reference_prep.py) give our window-function values,
    including a store with no event at all and events on its first and last day."""
    from bench._reference_prep import add_elapsed
    from rossmann.features import add_event_counters

    day = dt.date(2015, 1, 1)
    rows = [(store, day + dt.timedelta(d), promo, holiday, 0)
            for store, events in ((1, {0, 3, 9}), (2, set()), (3, {5}))
            for d in range(10)
            for promo, holiday in [(int(d in events), "a" if d == 4 and store == 3 else "0")]]
    df = spark.createDataFrame(rows, "Store int, Date date, Promo int, StateHoliday string, SchoolHoliday int")
    cols = ["Promo", "StateHoliday", "SchoolHoliday"]
    counters = [p + c for p in ("Before", "After") for c in cols]
    ours = {(r.Store, r.Date): tuple(r[c] for c in counters) for r in add_event_counters(df, cols).collect()}
    theirs = {(r.Store, r.Date): tuple(r[c] for c in counters) for r in add_elapsed(df, cols).collect()}
    assert ours == theirs
    assert ours[(3, day + dt.timedelta(2))] == (3, 2, 3, 3, 3, 3)  # Promo on day 5, holiday on day 4, none; at most 3


@pytest.mark.slow
def test_the_ddp_comparison_runs_every_contestant_on_the_same_rows():
    """bench/vs_ddp.py --quick: Horovod (gloo, mpirun, an MPIJob task), DDP and one process each train the Rossmann
    torch model 20 steps and print their RATIO lines; the distributed contestants train the same model on the same
    rows with the same dropout masks, so their losses after the steps agree to float rounding."""
    ran = subprocess.run([sys.executable, "-m", "bench.vs_ddp", "--quick"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=900)
    assert ran.returncode == 0, ran.stdout[-4000:]
    for name in ("horovod gloo", "horovod mpirun", "MPIJob task"):
        assert re.search(rf"RATIO rossmann: {name} / DDP samples per second = \d+\.\d\dx", ran.stdout), ran.stdout
    saved = json.loads((ROOT / ".cache" / "bench" / "results" / "vs_ddp-quick.json").read_text())
    runs = saved["models"]["rossmann"]["runs"]
    assert sorted(runs) == sorted(["horovod gloo", "horovod mpirun", "MPIJob task", "DDP", "one process"])
    ddp = runs["DDP"][0]["final_loss"]
    for name in ("horovod gloo", "horovod mpirun", "MPIJob task"):
        assert runs[name][0]["final_loss"] == pytest.approx(ddp, rel=1e-3), (name, runs[name][0], ddp)


@pytest.mark.heavy  # 7 TensorFlow processes, about 3.5 min under make test's load: shared by its two runs
def test_the_mwms_comparison_runs_every_contestant_on_the_same_rows():
    """bench/vs_mwms.py --quick: Horovod (gloo, mpirun), tf.distribute's MultiWorkerMirroredStrategy and one process
    each fit the Rossmann Keras model 20 steps on the same rows and print their RATIO lines; the distributed ones train
    the same model, so their losses after the steps are close (dropout's masks differ between the frameworks)."""
    ran = subprocess.run([sys.executable, "-m", "bench.vs_mwms", "--quick"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=900)
    assert ran.returncode == 0, ran.stdout[-4000:]
    for name in ("horovod gloo", "horovod mpirun"):
        assert re.search(rf"RATIO rossmann keras: {name} / MWMS samples per second = \d+\.\d\dx", ran.stdout), \
            ran.stdout
    saved = json.loads((ROOT / ".cache" / "bench" / "results" / "vs_mwms-quick.json").read_text())
    runs = saved["runs"]
    assert sorted(runs) == sorted(["horovod gloo", "horovod mpirun", "MWMS", "one process"])
    assert all(run[0]["ranks"] == (1 if name == "one process" else 2) for name, run in runs.items()), runs
    mwms = runs["MWMS"][0]["final_loss"]
    for name in ("horovod gloo", "horovod mpirun"):
        assert runs[name][0]["final_loss"] == pytest.approx(mwms, rel=0.05), (name, runs[name][0], mwms)
