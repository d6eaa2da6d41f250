"""The MPI route run locally: real Horovod ranks through ``pyflyte run``, as a user runs it."""

import json
import re

FLOWS = "tests/plugin/flows/mpi_flows.py"


def _world(output: str):
    match = re.search(r"World\(total=([\d.]+), size=(\d+), execution='([^']*)'\)", output)
    assert match, output[-3000:]
    return float(match.group(1)), int(match.group(2)), match.group(3)


def test_two_worker_replicas_allreduce(pyflyte_run):
    ran = pyflyte_run(FLOWS, "two_workers_wf")
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
    timeline = tmp_path / "timeline.json"
    ran = pyflyte_run(FLOWS, "settings_wf", env={"TEST_HOROVOD_TIMELINE": str(timeline)})
    assert ran.returncode == 0, ran.output[-3000:]
    seen = re.findall(r"rank=(\d),HOROVOD_FUSION_THRESHOLD=(\w+),HOROVOD_CYCLE_TIME=([\w.]+),HOROVOD_TIMELINE=(\S+?)['\]]",
                      ran.output)
    assert sorted(rank for rank, *_ in seen) == ["0", "1"], ran.output[-3000:]
    for _, fusion, cycle, path in seen:
        assert fusion == str(32 * 1024 * 1024)
        assert cycle == "2.5"
        assert path == str(timeline)
    text = timeline.read_text()
    assert text.startswith("[")
    text = text.rstrip()
    events = json.loads(text if text.endswith("]") else text.rstrip(",") + "]")  # open while Horovod runs
    assert any("ALLREDUCE" in json.dumps(e) for e in events)


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
