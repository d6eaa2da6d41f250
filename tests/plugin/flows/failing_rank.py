"""Rank 1 raises right after ``hvd.init()`` while rank 0 returns at once, waits in an allreduce, or computes for a
minute; how long after the world started (rank 0's body began, right after hvd.init()) or rank 1 failed, whichever
came first, is the error raised? Run as a user would run a script:

    python failing_rank.py ROUTE        ROUTE: gloo | mpi (local processes) | spark (Spark tasks)

Prints ``CASE <what> <seconds> <error type>: <its first line>`` for each of ``returns``, ``waits``, ``computes``
(``-`` for the seconds when the error is not rank 1's), then the error's other lines, each after ``  | `` (the
failed rank's traceback, and what else the error says).
"""

import os
import re
import sys
import tempfile
import time

from flytekitplugins.horovod import Horovod, HorovodRunner, RankFailedError, RankLostError


def rank_one_raises(what: str, started: str) -> int:
    import time

    import horovod.tensorflow as hvd
    import tensorflow as tf

    if hvd.rank() == 0:
        with open(started, "w") as f:  # the world is up: both ranks passed hvd.init() together
            f.write(f"{time.time():.3f}")
    else:
        raise ValueError(f"rank one failed at {time.time():.3f}")
    if what == "waits":
        hvd.allreduce(tf.constant(1.0))
    elif what == "computes":
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            sum(range(10000))
    return hvd.rank()


if __name__ == "__main__":
    route = sys.argv[1]
    runner = HorovodRunner(np=2 if route == "spark" else -2,
                           settings=Horovod(controller="mpi" if route == "mpi" else "gloo"))
    with tempfile.TemporaryDirectory(prefix="failing-rank-") as folder:
        started = os.path.join(folder, "started")
        for what in ("returns", "waits", "computes"):
            try:
                runner.run(rank_one_raises, what=what, started=started)
                print(f"CASE {what} - NO ERROR", flush=True)
            except (RankFailedError, RankLostError) as exc:
                seconds = "-"  # the error is not rank 1's ValueError: the test shows what it is
                found = re.search(r"rank one failed at (\d+\.\d+)", str(exc))
                if found and os.path.exists(started):
                    with open(started) as f:
                        seconds = f"{time.time() - min(float(found.group(1)), float(f.read())):.1f}"
                print(f"CASE {what} {seconds} {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
                print("".join(f"  | {line}\n" for line in str(exc).splitlines()[1:]), end="", flush=True)
