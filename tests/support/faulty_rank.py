"""The fault program of the tests and of scripts/reliability.py: rank 1 of two fails, after the first allreduce (both
ranks up and connected), in one of the ways a user's rank fails; rank 0 goes on allreducing until it notices. Run as a
user would run a script:

    python tests/support/faulty_rank.py ROUTE HOW [N] [--lost-rank-timeout S]

    ROUTE  gloo | mpi (local processes) | spark (Spark tasks)
    HOW    exit (os._exit(3)) | kill (SIGKILL, as the OOM killer) | stop (SIGSTOP: alive and silent, as a rank whose
           host is gone) | raise | memory (MemoryError) | sys.exit (status 2) | late-raise (raises 3 s after rank 0
           returned), or several (``exit,kill``) taken in turn
    N      how many runs (default 1), each after a line ``RUN <i> <how>``

Prints ``ERROR <type>`` (on a line of its own) and the error's message, or ``NO ERROR``, for each run; exits 1
when a run failed, as a script that lets the error out does.
"""

import argparse
import sys

from flytekitplugins.horovod import Horovod, HorovodRunner, RankFailedError, RankLostError

HOWS = ("exit", "kill", "stop", "raise", "memory", "sys.exit", "late-raise")


def rank_one_fails(how: str) -> int:
    import os
    import signal
    import time

    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.allreduce(tf.constant(1.0))  # both ranks are up and connected
    if hvd.rank() == 1:
        if how == "exit":
            print("rank one exits with status 3", flush=True)  # the error shows a rank's last lines: this one
            os._exit(3)
        if how in ("kill", "stop"):
            os.kill(os.getpid(), signal.SIGSTOP if how == "stop" else signal.SIGKILL)
        if how == "raise":
            raise ValueError("rank one cannot go on")
        if how == "memory":
            raise MemoryError("no memory left for rank one")
        if how == "sys.exit":
            sys.exit(2)
        if how == "late-raise":
            time.sleep(3)  # rank 0 has returned by then
            raise ValueError("rank one fails after rank zero returned")
    if how == "late-raise":
        return hvd.rank()
    for _ in range(1000):
        hvd.allreduce(tf.constant(1.0))
    return hvd.rank()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("route", choices=("gloo", "mpi", "spark"))
    parser.add_argument("how", help=f"one of {', '.join(HOWS)}, or several separated by commas")
    parser.add_argument("runs", nargs="?", type=int, default=1)
    parser.add_argument("--lost-rank-timeout", type=int, default=5)
    args = parser.parse_args()
    hows = args.how.split(",")
    unknown = [how for how in hows if how not in HOWS]
    if unknown:
        parser.error(f"HOW {unknown} is not one of {HOWS}")
    settings = Horovod(controller="mpi" if args.route == "mpi" else "gloo", lost_rank_timeout=args.lost_rank_timeout)
    runner = HorovodRunner(np=2 if args.route == "spark" else -2, settings=settings)
    failed = False
    for run in range(args.runs):
        how = hows[run % len(hows)]
        if args.runs > 1:
            print(f"RUN {run} {how}", flush=True)
        try:
            runner.run(rank_one_fails, how=how)
            print("NO ERROR", flush=True)
        except (RankFailedError, RankLostError) as exc:
            failed = True
            # on a line of its own even if a rank's output ended mid-line just before
            print(f"\nERROR {type(exc).__name__}\n{exc}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
