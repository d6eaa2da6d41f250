"""Every rank reaches rank 0's liveness port, so rank 0 watches every rank from the start (issue 21: in a local run on
this machine a rank's connection to the host's own non-loopback address hung, rank 0 warned "only 0 of the other 1
ranks reached its liveness port" and watched nobody)."""

import time

from flytekitplugins.horovod import Horovod
from flytekitplugins.horovod.executor.liveness import ipv4_addresses, nearest_first
from flytekitplugins.horovod.local_launcher import run_local

TIMEOUT_S = 2.0


def _outlasts_the_timeout() -> int:
    import horovod.tensorflow as hvd  # as a Keras body: TensorFlow imported while the heartbeat connects

    time.sleep(2 * TIMEOUT_S)
    return hvd.rank()


def test_every_rank_of_a_local_run_reaches_rank_0s_liveness_port(capfd):
    results = run_local(_outlasts_the_timeout, num_proc=2, settings=Horovod(lost_rank_timeout=TIMEOUT_S),
                        all_ranks=True)
    assert [r.value for r in results] == [0, 1]
    printed = capfd.readouterr()
    assert "reached its liveness port" not in printed.out + printed.err, printed.err[-3000:]


def test_a_rank_on_rank_0s_host_tries_loopback_first_and_another_host_as_published():
    here = ipv4_addresses()
    assert nearest_first([*here, "127.0.0.1"]) == ["127.0.0.1", *here]
    elsewhere = ["203.0.113.7", "127.0.0.1"]  # TEST-NET-3: never this machine's
    assert nearest_first(elsewhere) == elsewhere
