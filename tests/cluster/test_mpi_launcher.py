"""The MPI operator's launcher, run here: the serialized MPI-route command, rendered as propeller renders it, with the
hostfile the operator writes for the MPIJob propeller builds (``slotsPerWorker`` 1), run on localhost with real OpenMPI
(``mpirun -np 2``) and real ``horovodrun -np 2 --gloo``. Only the paths are local; the command is the registered one,
not written in this test. localhost stands for every worker pod: ``allreduce_mpi`` has 2 pods of 1 slot
(``localhost slots=2``), ``allreduce_gloo`` 1 pod of 2 slots, for which the operator's hostfile says
``localhost slots=1``, so its second rank exists only through the launcher's copy with the task's slots."""

import json
import os
import re
import time

import pytest

from tests.cluster.backend import Attempt, mpi_launcher, observed_env, value, writes
from tests.cluster.contract import launcher_args
from tests.conftest import _leftovers

FLOWS = "tests.cluster.flows.cluster_flows"
SCALE = 2.0  # each rank contributes SCALE * (rank + 1): the allreduce sum over 2 ranks is 6.0


@pytest.mark.parametrize("task, launcher, slots, hostfile, rank_var, tag, setting", [
    ("allreduce_mpi", "mpirun", 1, "localhost slots=2\n", "OMPI_COMM_WORLD_RANK", "[1,1]<stderr>:",
     ("HOROVOD_FUSION_THRESHOLD", str(32 * 1024 * 1024))),
    ("allreduce_gloo", "horovodrun", 2, "localhost slots=1\n", "HOROVOD_RANK", "[1]<stderr>:",
     ("HOROVOD_CYCLE_TIME", "2.5")),
])
def test_launcher_command_runs_two_ranks_and_only_rank_0_writes_outputs(
        flows_registration, tmp_path, task, launcher, slots, hostfile, rank_var, tag, setting):
    template = flows_registration.task(f"{FLOWS}.{task}")
    assert template.type == "mpi" and launcher_args(task, list(template.container.args), slots)[0] == launcher
    attempt = Attempt(tmp_path / "attempt")
    markers, log = tmp_path / "markers", tmp_path / "writes.log"
    attempt.write_inputs(template, {"scale": SCALE, "marker_dir": str(markers)})

    ran = mpi_launcher(template, attempt, tmp_path, extra_env=observed_env(log))
    assert ran.returncode == 0, ran.output[-4000:]
    assert (tmp_path / "hostfile").read_text() == hostfile  # the operator's, left as it was
    # the launcher ran the registered command, word for word, with only propeller's paths and the hostfile filled in
    registered = list(template.container.args)
    assert len(ran.command) == len(registered)
    for spec_word, ran_word in zip(registered, ran.command):
        if spec_word == "$(OMPI_MCA_orte_default_hostfile)":
            assert ran_word == str(tmp_path / "hostfile")
        elif "{{" in spec_word:
            assert ran_word == '""' or ran_word.startswith(str(attempt.root)), (spec_word, ran_word)
        else:
            assert ran_word == spec_word
    assert f"entrypoint.sh: {' '.join(ran.command)}" in ran.output.splitlines()

    # the body ran on 2 ranks, in 2 processes, each in the same world, with the Horovod settings exported
    seen = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in markers.glob("rank-*.json")}
    assert sorted(seen) == [0, 1], ran.output[-4000:]
    assert {s["size"] for s in seen.values()} == {2} and {s["total"] for s in seen.values()} == {6.0}
    assert seen[0]["pid"] != seen[1]["pid"]
    for rank, s in seen.items():
        assert s["env"][rank_var] == str(rank)  # started by the launcher, not by the plugin's local runtime
        assert s["env"]["FLYTE_INTERNAL_EXECUTION_ID"] == attempt.execution_id
        assert s["env"][setting[0]] == setting[1]

    # outputs.pb: written once, by rank 0, with the allreduce result; no error document; rank 1 ignored its outputs
    outputs = {k: value(v) for k, v in attempt.outputs().items()}
    assert outputs["total"] == 6.0 and outputs["size"] == 2
    assert sorted(os.listdir(attempt.output_prefix)) == ["outputs.pb"]
    assert attempt.error_files() == []
    opened = [w for w in writes(log, attempt.output_prefix) if w["event"] == "open"]
    assert [(w["path"], w["rank"], w["pid"]) for w in opened] == [
        (str(attempt.output_prefix / "outputs.pb"), 0, seen[0]["pid"])], opened
    by_rank_1 = [w["path"] for w in writes(log) if w["pid"] == seen[1]["pid"] or w["rank"] == 1]
    written = [p for p in by_rank_1 if os.path.basename(p) == "outputs.pb" or os.path.basename(p).startswith("error")]
    assert written == [], written  # rank 1 wrote no outputs.pb or error document anywhere, not even in its sandbox
    assert any(line.startswith(tag) and "IgnoreOutputs received" in line for line in ran.output.splitlines())

    # the directory output: uploaded by rank 0 only, under the raw output prefix
    model = outputs["model"]
    assert os.path.dirname(model) == str(attempt.raw_output_prefix)
    kept = sorted(os.listdir(attempt.raw_output_prefix))
    if task == "allreduce_gloo":  # Horovod(timeline_filename="timeline.json"): rank 0 copies it where it outlives the pod
        timeline = attempt.raw_output_prefix / "horovod" / "timeline.json"
        assert kept == sorted([os.path.basename(model), "horovod"]) and "ALLREDUCE" in timeline.read_text()
        assert f"timeline: {timeline}" in ran.output, ran.output[-4000:]
    else:
        assert kept == [os.path.basename(model)]
    with open(os.path.join(model, "weights.txt")) as f:
        assert f.read() == "total=6.0 rank=0\n"
    # (every rank marks in the failure folder that it returned; the launcher removes those marks)
    rank_files = [w for w in writes(log, attempt.raw_output_prefix) if "/horovod-failures/" not in w["path"]]
    assert {w["pid"] for w in rank_files} == {seen[0]["pid"]}

    time.sleep(0.5)
    assert _leftovers(ran.marker) == [], "launcher left processes running"


def test_a_failing_rank_is_reported_with_its_own_error(flows_registration, tmp_path):
    from flyteidl.core import errors_pb2

    template = flows_registration.task(f"{FLOWS}.rank_one_fails")
    attempt = Attempt(tmp_path / "attempt")
    attempt.write_inputs(template, {})
    ran = mpi_launcher(template, attempt, tmp_path)
    # pyflyte-execute records a user error in error.pb and exits 0 (so does mpirun); Flyte fails the task from error.pb
    assert ran.returncode == 0, ran.output[-4000:]
    assert "outputs.pb" not in os.listdir(attempt.output_prefix)
    assert attempt.error_files() == ["error.pb"]
    error = errors_pb2.ErrorDocument.FromString((attempt.output_prefix / "error.pb").read_bytes()).error
    assert "ValueError: rank one cannot go on" in error.message, error.message[-800:]
    assert error.kind == errors_pb2.ContainerError.NON_RECOVERABLE  # a bug in the body: a retry would fail again
    time.sleep(0.5)
    assert _leftovers(ran.marker) == []


@pytest.mark.parametrize("task, fail_on_error", [("rank_one_killed_mpi", ""), ("rank_one_killed_gloo", ""),
                                                 ("rank_one_killed_mpi", "true")])
def test_a_killed_rank_is_the_task_error_the_launcher_writes(flows_registration, tmp_path, task, fail_on_error):
    """mpirun/horovodrun exit non-zero when a rank is killed, which on a cluster fails the MPIJob with only "Job failed"
    (propeller reads error.pb only from a job that succeeded): the launcher writes the task's error and exits 0, or 1
    with FLYTE_FAIL_ON_ERROR set, as pyflyte-execute does."""
    from flyteidl.core import errors_pb2

    template = flows_registration.task(f"{FLOWS}.{task}")
    attempt = Attempt(tmp_path / "attempt")
    attempt.write_inputs(template, {})
    started = time.time()
    ran = mpi_launcher(template, attempt, tmp_path, extra_env={"FLYTE_FAIL_ON_ERROR": fail_on_error})
    assert ran.returncode == (1 if fail_on_error else 0), ran.output[-4000:]
    assert "outputs.pb" not in os.listdir(attempt.output_prefix)
    assert attempt.error_files() == ["error.pb"], ran.output[-4000:]
    error = errors_pb2.ErrorDocument.FromString((attempt.output_prefix / "error.pb").read_bytes()).error
    assert error.kind == errors_pb2.ContainerError.RECOVERABLE, error.message  # Flyte's retries apply
    assert "Horovod rank 1 died on host localhost" in error.message and "SIGKILL" in error.message, error.message
    assert started <= error.timestamp.seconds + 1 <= time.time() + 1, error.timestamp
    time.sleep(0.5)
    assert _leftovers(ran.marker) == []


def test_workers_the_launcher_cannot_reach_fail_the_task_with_the_launcher_s_output(flows_registration, tmp_path):
    """As on a training-operator v1.8 cluster whose worker pods are not running yet: ``kubexec.sh`` (here an agent
    that fails as ``kubectl exec`` does) cannot start mpirun's daemons, no rank starts, and the task's error is the
    launcher's own output, recoverable."""
    from flyteidl.core import errors_pb2

    template = flows_registration.task(f"{FLOWS}.allreduce_mpi")
    attempt = Attempt(tmp_path / "attempt")
    attempt.write_inputs(template, {"scale": SCALE, "marker_dir": str(tmp_path / "markers")})
    agent = tmp_path / "kubexec.sh"
    agent.write_text('#!/bin/sh\necho "error: unable to upgrade connection: container not found (\\"mpi\\")" >&2\n'
                     'exit 1\n')
    agent.chmod(0o755)
    ran = mpi_launcher(template, attempt, tmp_path, workers=["job-worker-0", "job-worker-1"],
                       extra_env={"OMPI_MCA_plm_rsh_agent": str(agent)}, timeout=60)
    assert ran.returncode == 0, ran.output[-4000:]
    assert attempt.error_files() == ["error.pb"] and not (tmp_path / "markers").exists(), ran.output[-4000:]
    error = errors_pb2.ErrorDocument.FromString((attempt.output_prefix / "error.pb").read_bytes()).error
    assert error.kind == errors_pb2.ContainerError.RECOVERABLE, error.message
    assert "Horovod job failed before any rank reported an error: mpirun exited with status" in error.message, \
        error.message
    assert "unable to upgrade connection" in error.message, error.message
    time.sleep(0.5)
    assert _leftovers(ran.marker) == []


def test_a_launcher_asked_to_stop_stops_its_ranks(flows_registration, tmp_path):
    """The kubelet stops a pod with SIGTERM (Flyte aborting the task): the launcher stops horovodrun and the ranks it
    started (``stopped_by_sigterm``), then ends with 143, and no process of the job is left."""
    import signal
    from concurrent.futures import ThreadPoolExecutor

    import psutil

    template = flows_registration.task(f"{FLOWS}.waits_to_be_stopped")
    attempt, markers = Attempt(tmp_path / "attempt"), tmp_path / "markers"
    attempt.write_inputs(template, {"marker_dir": str(markers)})
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(mpi_launcher, template, attempt, tmp_path, timeout=300)
        deadline = time.monotonic() + 240
        while len(list(markers.glob("rank-*.json"))) < 2:
            assert not job.done(), job.result().output[-4000:]
            assert time.monotonic() < deadline, "the 2 ranks did not start"
            time.sleep(0.2)
        (launcher,) = [p for p in psutil.process_iter(["cmdline"])
                       if "horovod_flyte_runtime.cluster_launcher" in (p.info["cmdline"] or [])
                       and str(attempt.output_prefix) in " ".join(p.info["cmdline"])]
        launcher.send_signal(signal.SIGTERM)
        ran = job.result()
    assert ran.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM), ran.output[-4000:]  # by itself, or under tini
    deadline = time.monotonic() + 30
    while _leftovers(ran.marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _leftovers(ran.marker) == []


@pytest.mark.serial  # asserts how fast: alone, not beside other tests (make test)
@pytest.mark.slow
@pytest.mark.parametrize("task", ["out_of_step_mpi", "out_of_step_gloo"])
def test_ranks_out_of_step_are_the_named_user_error_the_launcher_writes(flows_registration, tmp_path, task):
    """Rank 1 sleeps outside any collective while rank 0 waits in one: Horovod's stall check (stall_timeout=8) stops
    the ranks, and error.pb names the tensor and the missing rank, non-recoverable (a retry would stall again)."""
    from flyteidl.core import errors_pb2

    template = flows_registration.task(f"{FLOWS}.{task}")
    attempt = Attempt(tmp_path / "attempt")
    attempt.write_inputs(template, {})
    ran = mpi_launcher(template, attempt, tmp_path)
    ended = time.time()
    assert attempt.error_files() == ["error.pb"], ran.output[-4000:]
    error = errors_pb2.ErrorDocument.FromString((attempt.output_prefix / "error.pb").read_bytes()).error
    assert error.kind == errors_pb2.ContainerError.NON_RECOVERABLE, error.message
    first = error.message.splitlines()[0]
    assert "StalledRanksError" in error.message and "rank 1 never submitted allreduce.epoch_metric" in error.message, \
        error.message
    # From the moment rank 0 left the warm-up allreduce (the stall begins) to the launcher's exit: the setting + 15 s.
    # Starting the ranks (flytekit, torch and Horovod imports) is not what this times: 9-18 s on an idle machine, and
    # the whole run took 54.6 s beside the other tests in CI (bound 53 s then, start included).
    stalled_from = float(re.search(r"rank 0 out of step from ([0-9.]+)", ran.output).group(1))
    assert ended - stalled_from < 8 + 15, (ended - stalled_from, first)
    time.sleep(0.5)
    assert _leftovers(ran.marker) == []


@pytest.mark.serial  # asserts how fast: alone, not beside other tests (make test)
@pytest.mark.slow
def test_a_wedged_mpirun_after_every_rank_returned_ends_the_launcher_with_the_outputs(flows_registration, tmp_path):
    """Issue 38, item 2: rank 0 SIGSTOPs mpirun after the allreduce; both ranks return and pyflyte-execute writes the
    outputs. The launcher stops mpirun 15 s later, says so once and exits 0: the task's outputs stand."""
    template = flows_registration.task(f"{FLOWS}.wedges_mpirun")
    attempt, stamp = Attempt(tmp_path / "attempt"), tmp_path / "returned"
    attempt.write_inputs(template, {})
    ran = mpi_launcher(template, attempt, tmp_path, extra_env={"WEDGE_STAMP": str(stamp)})
    ended = time.time()
    assert ran.returncode == 0, ran.output[-4000:]
    assert {k: value(v) for k, v in attempt.outputs().items()} == {"o0": 3.0}
    assert attempt.error_files() == []
    warnings = [line for line in ran.output.splitlines() if "mpirun did not exit within 15 s after every rank" in line]
    assert len(warnings) == 1, ran.output[-4000:]
    after = ended - float(stamp.read_text())
    print(f"the launcher ended {after:.1f} s after its ranks returned ({ran.seconds:.1f} s in all)")
    assert after < 60, f"the launcher ended {after:.0f} s after its ranks returned"
    assert not (attempt.raw_output_prefix / "horovod-failures").exists()  # the marks removed
    time.sleep(0.5)
    assert _leftovers(ran.marker) == []
