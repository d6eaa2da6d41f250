"""The Flyte 2 plugin's local runs: ``flyte.init(); flyte.run(task, ...)`` and ``flyte run --local FILE TASK`` start
``worker.replicas * slots`` real Horovod ranks through the v1 plugin's runtime and return rank 0's result.

No mocks: the tasks in flows/allreduce.py allreduce ``x * (rank + 1)`` over 2 ranks, so rank 0 returns
"rank 0 of 2: 3.0" for x=1 only where both ranks took part."""

import re
import time

import pytest

# until the set-up installs them (issue 36), a checkout without them skips this module, saying so
pytest.importorskip("flyte", reason="the flyte SDK is not installed here")
pytest.importorskip("flyteplugins.horovod", reason="flyteplugins-horovod is not installed here")

import flyte  # noqa: E402
import flyte.errors  # noqa: E402

from tests.flyte2.flows import allreduce as flows  # noqa: E402
from tests.support import ROOT, VENV_BIN, leftovers, run_command  # noqa: E402

pytestmark = pytest.mark.needs_framework("pytorch")

FLOWS = "tests/flyte2/flows/allreduce.py"


@pytest.fixture(scope="module")
def local():
    flyte.init()  # no endpoint: flyte.run runs here


def _output(run) -> str:
    return run.outputs()[0]


@pytest.mark.parametrize("task", [flows.allreduce, flows.allreduce_mpi, flows.allreduce_async],
                         ids=["gloo", "mpirun", "async body"])
def test_two_ranks_allreduce_and_rank_0s_result_is_the_output(local, task):
    assert _output(flyte.run(task, x=1.0)) == "rank 0 of 2: 3.0"


def test_a_rank_that_raises_is_named_with_its_traceback(local):
    with pytest.raises(flyte.errors.RuntimeUserError) as raised:
        flyte.run(flows.rank_1_raises, x=1.0)
    assert raised.value.code == "RankFailedError"  # the runtime's error, as Flyte 2 reports a user error
    message = str(raised.value)
    assert message.startswith("Horovod rank 1 failed on host "), message
    assert "Traceback (most recent call last)" in message and "ValueError: rank 1 refuses 1.0" in message


def test_a_rank_that_raises_is_not_retried_and_a_lost_rank_is(local, tmp_path):
    """Flyte 2 retries every error unless it is a ``NonRecoverableError``: the same failure on every attempt (a body
    that raises) keeps the task's retries=2 unused; a rank killed on the first attempt is retried (retries=1)."""
    with pytest.raises(flyte.errors.RuntimeUserError) as raised:
        flyte.run(flows.rank_1_raises_with_retries, log=str(tmp_path / "raises"))
    assert raised.value.code == "RankFailedError", raised.value
    assert (tmp_path / "raises").read_text().count("attempt") == 1
    assert _output(flyte.run(flows.rank_1_killed_on_the_first_attempt, log=str(tmp_path / "killed"))) == \
        "rank 0 of 2: 3.0"
    assert (tmp_path / "killed").read_text().count("attempt") == 2


def test_a_retry_s_rank_0_loads_the_checkpoint_the_first_attempt_s_rank_0_saved(local, tmp_path):
    """``flyte.ctx().checkpoint`` in a rank is the task's: the first attempt's rank 0 saves, rank 1 is killed, and
    the retry's rank 0 loads what was saved (Flyte 2's local controller stages it for the retry)."""
    output = _output(flyte.run(flows.resumes_from_rank_0s_checkpoint, log=str(tmp_path / "attempts")))
    assert output == "rank 0 of 2: 3.0; restored attempt 1", output
    assert (tmp_path / "attempts").read_text().count("attempt") == 2


@pytest.mark.serial  # a bound on how fast the stall is named
def test_ranks_out_of_step_fail_within_stall_timeout_naming_the_tensor_and_the_missing_rank(local):
    """Horovod(stall_timeout=8): rank 0 waits in ``epoch_loss``, rank 1 in its extra ``step_2``."""
    started = time.monotonic()
    with pytest.raises(flyte.errors.RuntimeUserError) as raised:
        flyte.run(flows.rank_1_one_step_more, x=1.0)
    seconds = time.monotonic() - started
    assert raised.value.code == "StalledRanksError", raised.value
    first = str(raised.value).splitlines()[0]
    assert first.startswith("Horovod ranks out of step for more than 8 s (stall_timeout)"), first
    assert "rank 1 never submitted allreduce.epoch_loss" in first, first
    assert "rank 0 never submitted allreduce.step_2" in first, first
    assert seconds < 8 + 15 + 20, seconds  # the setting + 15 s, + starting Python, torch and two ranks (as v1's)


@pytest.mark.parametrize("task", ["allreduce", "allreduce_mpi"])
def test_flyte_run_local_on_the_command_line(task):
    ran = run_command([str(VENV_BIN / "flyte"), "run", "--local", FLOWS, task, "--x", "1"], cwd=ROOT, timeout=300)
    assert ran.returncode == 0, ran.output[-3000:]
    assert 'o0="rank 0 of 2: 3.0"' in ran.output, ran.output[-3000:]
    assert re.search(rf"\[horovod\] {task}: rank logs: \S+ranks-\S+\.log", ran.output), ran.output[-3000:]
    assert leftovers(ran.marker) == []


def test_a_failing_rank_fails_flyte_run_local_naming_the_rank():
    ran = run_command([str(VENV_BIN / "flyte"), "run", "--local", FLOWS, "rank_1_raises", "--x", "1"], cwd=ROOT,
                      timeout=300)
    assert ran.returncode != 0
    assert "Horovod rank 1 failed on host" in ran.output and "ValueError: rank 1 refuses 1.0" in ran.output
    assert leftovers(ran.marker) == []
