"""The MPI route run locally: real Horovod ranks through ``pyflyte run``, as a user runs it."""

import html
import json
import os
import re
import time
from pathlib import Path

import pytest

from horovod_flyte_runtime.rank_start import RANK_GC_THRESHOLD
from tests.conftest import ROOT

FLOWS = "tests/plugin/flows/mpi_flows.py"


def _world(output: str):
    match = re.search(r"World\(total=([\d.]+), size=(\d+), execution='([^']*)'\)", output)
    assert match, output[-3000:]
    return float(match.group(1)), int(match.group(2)), match.group(3)


@pytest.mark.smoke
def test_two_worker_replicas_allreduce(pyflyte_run):
    # every rank's lines on the console (FLYTE_HOROVOD_VERBOSE=1), so this shows rank 1 ran and its lines are prefixed
    ran = pyflyte_run(FLOWS, "two_workers_wf", env={"FLYTE_HOROVOD_VERBOSE": "1"})
    assert ran.returncode == 0, ran.output[-3000:]
    total, size, execution = _world(ran.output)
    assert (total, size) == (3.0, 2)
    assert execution  # rank 0 saw the launching task's execution id (rebuilt context)
    assert "[1]<stdout>:rank 1 of 2: allreduce -> 3.0" in ran.output  # rank 1 really ran, output prefixed


def test_two_slots_on_one_worker_allreduce(pyflyte_run):
    ran = pyflyte_run(FLOWS, "two_slots_wf")
    assert ran.returncode == 0, ran.output[-3000:]
    assert _world(ran.output)[:2] == (3.0, 2)


def test_settings_reach_every_rank_and_timeline_is_written(pyflyte_run, tmp_path):
    """The task's settings reach both ranks; the two ranks on this host split its cores between their compute threads
    (TensorFlow's pools), a thread count the user set (OpenMP's, here) is kept, and each rank collects its youngest
    garbage every RANK_GC_THRESHOLD allocations, not Python's 700."""
    timeline = tmp_path / "timeline.json"
    ran = pyflyte_run(FLOWS, "settings_wf", env={"TEST_HOROVOD_TIMELINE": str(timeline), "OMP_NUM_THREADS": "3"})
    assert ran.returncode == 0, ran.output[-3000:]
    seen = re.findall(r"rank=(\d),HOROVOD_FUSION_THRESHOLD=(\w+),HOROVOD_CYCLE_TIME=([\w.]+),HOROVOD_TIMELINE=([^,]+),"
                      r"OMP_NUM_THREADS=(\w+),TF_NUM_INTRAOP_THREADS=(\w+),TF_NUM_INTEROP_THREADS=(\w+),"
                      r"gc_threshold=(\d+)['\]]", ran.output)
    assert sorted(rank for rank, *_ in seen) == ["0", "1"], ran.output[-3000:]
    share = str(max(1, len(os.sched_getaffinity(0)) // 2))
    for _, fusion, cycle, path, omp, intra, inter, gc_threshold in seen:
        assert int(gc_threshold) == RANK_GC_THRESHOLD > 700
        assert fusion == str(32 * 1024 * 1024)
        assert cycle == "2.5"
        assert path == str(timeline)
        assert (omp, intra, inter) == ("3", share, share)
    text = timeline.read_text()
    assert text.startswith("[")
    text = text.rstrip()
    events = json.loads(text if text.endswith("]") else text.rstrip(",") + "]")  # open while Horovod runs
    assert any("ALLREDUCE" in json.dumps(e) for e in events)


def test_rank_zero_on_the_console_every_rank_in_the_log_and_the_horovod_deck(pyflyte_run):
    """The console shows rank 0's lines only, and one line saying where the rank logs, the timeline, the autotune log
    and the Deck are: relative timeline and autotune paths land in the task's working directory, not where pyflyte
    started. The "Horovod" Deck (and the log file it links) has every rank's lines, the timeline's totals and the
    autotune log, which after 20 steps holds no configuration, as the run says. With FLYTE_HOROVOD_VERBOSE=1 the
    console shows every rank's too."""
    env = {"TEST_HOROVOD_TIMELINE": "timeline.json", "TEST_HOROVOD_AUTOTUNE_LOG": "autotune.csv"}
    ran = pyflyte_run(FLOWS, "settings_wf", env=env)
    assert ran.returncode == 0, ran.output[-3000:]
    assert "rank 0 says hello" in ran.output and "rank 1 says hello" not in ran.output, ran.output[-3000:]
    where = re.search(r"^\[horovod\] settings_seen: rank logs: (\S+\.log); timeline: (\S+); autotune log: (\S+); "
                      r"Deck: (\S+/deck\.html)$", ran.output, re.M)
    assert where, ran.output[-3000:]
    log, timeline, autotune, deck = (Path(p) for p in where.groups())
    workdir = log.parent.parent  # <working directory>/horovod-logs/ranks-*.log
    assert timeline == workdir / "timeline.json" and autotune == workdir / "autotune.csv", where.group(0)
    assert timeline.exists() and autotune.exists() and not (ROOT / "timeline.json").exists()
    assert "autotune tried no configuration" in ran.output and "about 204 training steps" in ran.output
    page = html.unescape(deck.read_text())
    assert "[1]<stdout>:rank 1 says hello" in page and "[0]<stdout>:rank 0 says hello" in page
    assert f'<a href="file://{log}">{log}</a> (last' in page
    assert "[1]<stdout>:rank 1 says hello" in log.read_text()
    assert "Horovod timeline" in page and re.search(r"<td>ALLREDUCE</td><td>\d+</td>", page), page[-3000:]
    assert "Horovod autotune log" in page and str(autotune) in page and "tried no configuration" in page

    verbose = pyflyte_run(FLOWS, "settings_wf", env={"FLYTE_HOROVOD_VERBOSE": "1"})
    assert verbose.returncode == 0 and "[1]<stdout>:rank 1 says hello" in verbose.output, verbose.output[-3000:]


@pytest.mark.serial  # asserts how fast: alone, not beside other tests (make test)
def test_failing_rank_fails_the_task_fast_and_cleanly(pyflyte_run):
    ran = pyflyte_run(FLOWS, "failing_wf", timeout=120)
    assert ran.returncode != 0
    assert "rank 1 failed" in ran.output
    assert "ValueError: rank one cannot go on" in ran.output
    assert ran.seconds < 60, f"took {ran.seconds:.0f} s"
    # the pyflyte_run fixture then checks that no process of this run is left


def test_zero_fusion_threshold_and_cache_capacity_reach_every_rank(pyflyte_run):
    ran = pyflyte_run(FLOWS, "zero_settings_wf")
    assert ran.returncode == 0, ran.output[-3000:]
    assert re.findall(r"rank=(\d),(\w+),(\w+)", ran.output.strip().splitlines()[-1]) == [("0", "0", "0"),
                                                                                         ("1", "0", "0")]


@pytest.mark.serial  # asserts how fast: alone, not beside other tests (make test)
@pytest.mark.slow
def test_a_wedged_mpirun_after_every_rank_returned_ends_the_task_with_rank_0_s_result(pyflyte_run, tmp_path):
    # issue 38, item 2: rank 0 SIGSTOPs mpirun after the allreduce; both ranks return (and hang in MPI_Finalize)
    stamp = tmp_path / "returned"
    ran = pyflyte_run(FLOWS, "wedged_mpirun_wf", timeout=180, env={"TEST_WEDGE_STAMP": str(stamp)})
    ended = time.time()
    assert ran.returncode == 0, ran.output[-3000:]
    warnings = [line for line in ran.output.splitlines() if "mpirun did not exit within 15 s after every rank" in line]
    assert len(warnings) == 1, ran.output[-3000:]
    assert re.search(r"^3\.0$", ran.output, re.MULTILINE), ran.output[-3000:]  # rank 0's result, the allreduce sum
    after = ended - float(stamp.read_text())
    print(f"the task ended {after:.1f} s after its ranks returned ({ran.seconds:.1f} s in all)")
    assert after < 60, f"the task ended {after:.0f} s after its ranks returned"
    # the pyflyte_run fixture then checks that no process of this run is left
