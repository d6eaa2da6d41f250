"""Rank 0's warning that a rank never reached its liveness port is about ranks that never did: a rank that connected
and ended its body before rank 0 (its connection closed) was watched (issue 21: every default wf run longer than
``lost_rank_timeout`` warned "only 0 of the other 1 ranks reached its liveness port" when rank 1 finished first)."""

import time

import pytest

from flytekitplugins.horovod import Horovod
from horovod_flyte_runtime.local_launcher import run_local

TIMEOUT_S = 2.0
pytestmark = pytest.mark.serial  # a 2 s liveness timeout: alone, not beside other tests (make test)


def _rank_0_outlasts_the_timeout() -> int:
    import horovod.tensorflow as hvd

    if hvd.rank() == 0:
        time.sleep(2 * TIMEOUT_S)
    return hvd.rank()


def test_a_rank_that_ended_before_rank_0_is_not_reported_as_never_connected(capfd):
    results = run_local(_rank_0_outlasts_the_timeout, num_proc=2, settings=Horovod(lost_rank_timeout=TIMEOUT_S),
                        all_ranks=True)
    assert [r.value for r in results] == [0, 1]
    printed = capfd.readouterr()
    assert "reached its liveness port" not in printed.out + printed.err, printed.err[-3000:]
