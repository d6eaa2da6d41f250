"""Attribution under load: which rank failed is decided from every rank's record or exit status, not from which of
two processes that fail together the launcher happens to see first (issue 22 item 7)."""

import re
import subprocess
import sys

import pytest

from tests.conftest import run_command

RUNS = 20

# a killed rank is named by timing (its echo first, its cause within SETTLE_S): make test runs these alone
pytestmark = pytest.mark.serial


@pytest.mark.slow
def test_the_rank_that_died_is_named_twenty_times_of_twenty_with_the_other_core_busy():
    """Rank 1 exits (status 3) or is SIGKILLed, in turn, 20 times, while a busy loop keeps another core busy; rank 0
    fails as its echo each time. Every run must name rank 1 and how it ended.

    The loop runs at the lowest priority (nice 19): alone it still fills the core the ranks leave, and in make test,
    where the other pytest run keeps that core busy already, it yields it to that run's work instead of taking a third
    of the machine for the test's 3 to 4 minutes."""
    hog = subprocess.Popen([sys.executable, "-c", "import os\nos.nice(19)\nwhile True: pass"])
    try:
        ran = run_command([sys.executable, "tests/support/faulty_rank.py", "gloo", "exit,kill", str(RUNS)],
                          timeout=400)
    finally:
        hog.kill()
        hog.wait()
    runs = re.split(r"^RUN \d+ ", ran.output, flags=re.MULTILINE)[1:]
    assert len(runs) == RUNS, ran.output[-4000:]
    wrong = []
    for run in runs:
        how, error = run.split("\n", 1)
        cause = "exited with status 3" if how == "exit" else "killed by SIGKILL"
        found = re.search(r"^ERROR \w+\n.*", error, re.MULTILINE | re.DOTALL)
        reported = found.group(0) if found else error
        if not (reported.startswith("ERROR RankLostError\nHorovod rank 1 died on host ") and cause in reported):
            wrong.append(f"{how}: {reported[:600]}")
    assert wrong == [], f"{len(wrong)} of {RUNS} runs blamed the wrong rank or cause:\n" + "\n".join(wrong)
    print(f"{RUNS} of {RUNS} right in {ran.seconds:.0f} s")
