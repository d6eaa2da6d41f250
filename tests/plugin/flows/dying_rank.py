"""Rank 1 dies without an exception (``os._exit`` or SIGKILL) after the first allreduce, as with the OOM killer or a
native crash, or freezes (SIGSTOP: alive, silent, like a rank whose host is gone); rank 0 goes on until it notices.
Run as a user would run a script:

    python dying_rank.py ROUTE HOW [N]  ROUTE: gloo | mpi (local processes) | spark (Spark tasks)
                                        HOW: exit | kill | stop, or several (``exit,kill``) taken in turn
                                        N: how many runs (default 1), each after a line ``RUN <i> <how>``

Prints ``ERROR <type>`` and the error's message, or ``NO ERROR``, for each run.
"""

import sys

from flytekitplugins.horovod import Horovod, HorovodRunner, RankFailedError, RankLostError


def rank_one_dies(how: str) -> int:
    import os
    import signal

    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.allreduce(tf.constant(1.0))  # both ranks are up and connected
    if hvd.rank() == 1:
        if how == "exit":
            os._exit(3)
        os.kill(os.getpid(), signal.SIGSTOP if how == "stop" else signal.SIGKILL)
    for _ in range(1000):
        hvd.allreduce(tf.constant(1.0))
    return hvd.rank()


if __name__ == "__main__":
    route, hows, times = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]) if len(sys.argv) > 3 else 1
    runner = HorovodRunner(np=2 if route == "spark" else -2,
                           settings=Horovod(controller="mpi" if route == "mpi" else "gloo", lost_rank_timeout=5))
    for run in range(times):
        how = hows[run % len(hows)]
        if times > 1:
            print(f"RUN {run} {how}", flush=True)
        try:
            runner.run(rank_one_dies, how=how)
            print("NO ERROR")
        except (RankFailedError, RankLostError) as exc:
            print(f"ERROR {type(exc).__name__}\n{exc}", flush=True)
