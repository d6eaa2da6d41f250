"""Ranks out of step fail in bounded time with ``StalledRanksError`` naming the tensor and the missing rank; ranks in
step, however slow, do not. Horovod's own stall report (as its coordinator prints it) is what is parsed; the
multi-process cases run ``tests/support/stalled_rank.py`` as a user runs a script (the other routes and frameworks:
``scripts/reliability.py``, kind ``stall``)."""

import subprocess
import sys
import time

import pytest

from flytekitplugins.horovod import Horovod, HorovodConfigError, StalledRanksError
from horovod_flyte_runtime.classify import ECHO, STALLED
from horovod_flyte_runtime.failures import RankFailures
from horovod_flyte_runtime.joining import AT_INIT, STARTED, JoinWatch
from horovod_flyte_runtime.stall import StallParser
from tests.conftest import ROOT

# Horovod 0.28.1's report, as rank 0 wrote it to its stderr (stall_inspector.cc), a warning then the shutdown
REPORT = """[2026-11-26 10:27:49.381217: W /h/horovod/common/stall_inspector.cc:107] One or more tensors were submitted \
to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 3 \
seconds. This may indicate that different ranks are trying to submit different tensors or that only subset of ranks \
is submitting tensors, which will cause deadlock.
Missing ranks:
0: [allreduce.grad_1]
1: [allreduce.epoch_loss, allreduce.x]
[2026-11-26 10:27:55.382075: E /h/horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be \
reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 3 seconds. \
This may indicate that different ranks are trying to submit different tensors or that only subset of ranks is \
submitting tensors, which will cause deadlock.
Missing ranks:
0!: [allreduce.grad_1]
1!: [allreduce.epoch_loss, allreduce.x]
One or more rank (marked by "!") is stalled for longer than 12 seconds. Will shutdown.
"""

# fault, stall and liveness timings are what these tests assert: make test runs them alone
pytestmark = pytest.mark.serial


def test_horovod_s_report_is_read_as_a_warning_then_a_shutdown():
    reports = []
    parser = StallParser(reports.append)
    for line in REPORT.splitlines():
        parser.line(line)
    missing = {0: ["allreduce.grad_1"], 1: ["allreduce.epoch_loss", "allreduce.x"]}
    assert [(r.warn_s, r.missing, r.shutdown) for r in reports] == [(3, missing, False), (3, missing, True)]
    described = reports[1].describe(size=3, first_seen=reports[0].seen_at)
    assert described.startswith("rank 0 never submitted allreduce.grad_1 (submitted by ranks 1, 2); rank 1 never "
                                "submitted allreduce.epoch_loss, allreduce.x (submitted by ranks 0, 2)"), described


def test_a_stall_record_is_the_cause_and_a_user_error(tmp_path):
    """The stall is recorded before rank 0 sees the shutdown as an error: that echo never replaces it."""
    failures = RankFailures(str(tmp_path / "failures"))
    failures.record(0, STALLED, "Horovod ranks out of step for more than 8 s: rank 1 never submitted x")
    failures.record_exception(0, RuntimeError("Horovod has been shut down. This was caused by ..."))
    failures.record(1, ECHO, "HorovodInternalError")
    error = failures.error(RuntimeError("rank 0 exited with status 1"))
    assert type(error) is StalledRanksError
    assert str(error).splitlines()[0].startswith("Horovod ranks out of step for more than 8 s: rank 1 never submitted")
    assert "rank 1 on" in str(error)  # who failed after it


def test_ranks_that_never_met_are_named(tmp_path):
    watch = JoinWatch(0, 3, "h0", str(tmp_path), 30, lambda text: None)
    text = watch.describe({0: {"host": "h0", "state": AT_INIT}, 1: {"host": "h1", "state": STARTED}})
    assert text == ("Horovod ranks never met: rank 0 on h0 waited start_timeout=30 s in hvd.init() for every rank; "
                    "rank 0 on h0 reached it; rank 1 on h1 started but never reached it (an import or a data load "
                    "before hvd.init() that does not finish); rank 2 never started (its process or Spark task did not "
                    "run)")


def test_the_setting_reaches_horovod_s_stall_check():
    assert Horovod().stall_timeout == 300  # default: fails a stalled job within 6 minutes
    env, args = Horovod(stall_timeout=20).env(), Horovod(stall_timeout=20).horovodrun_args()
    assert (env["HOROVOD_STALL_CHECK_TIME_SECONDS"], env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"]) == ("5", "20")
    assert args[args.index("--stall-check-shutdown-time-seconds") + 1] == "20"
    assert Horovod(stall_timeout=None).env()["HOROVOD_STALL_CHECK_DISABLE"] == "1"
    assert "--no-stall-check" in Horovod(stall_timeout=None).horovodrun_args()
    for bad in (0, 2.5, True):
        with pytest.raises(HorovodConfigError, match="stall_timeout"):
            Horovod(stall_timeout=bad)


def _run(how: str, stall_timeout: int) -> "tuple[float, str]":
    started = time.monotonic()
    ran = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "stalled_rank.py"), "gloo", how,
                          "--stall-timeout", str(stall_timeout)], cwd=ROOT, capture_output=True, text=True,
                         timeout=180)
    return time.monotonic() - started, ran.stdout + ran.stderr


@pytest.mark.slow
def test_uneven_batches_fail_within_the_setting_naming_the_tensor_and_the_missing_rank():
    """Rank 1 has 3 batches more: rank 0 waits in its metric allreduce, rank 1 in its gradients'. Gloo ranks."""
    seconds, output = _run("uneven-torch", 8)
    assert "\nERROR StalledRanksError\n" in output, output[-3000:]
    first = output.split("\nERROR StalledRanksError\n", 1)[1].splitlines()[0]
    assert "more than 8 s" in first and "epoch_loss" in first and "rank 1 never submitted" in first, first
    assert "WARNING flytekitplugins.horovod: ranks out of step" in output  # the first report, on rank 0's line
    assert seconds < 8 + 15 + 20, seconds  # the setting + 15 s, + starting Python, torch and two ranks


@pytest.mark.slow
def test_ranks_in_step_computing_longer_than_the_setting_are_not_stopped():
    """Every rank computes 1.5 x stall_timeout between two allreduces: slow, but in step."""
    _, output = _run("in-step", 8)
    assert "NO ERROR" in output and "out of step" not in output, output[-3000:]
