"""Ctrl-C in a Spark task, any Spark task (a plain flytekitplugins-spark one too): the run stops at once and its
error says it was interrupted by the user, not what the interruption broke on its way.

pyspark's own SIGINT handler calls the JVM from the signal handler, while the main thread waits for the JVM on the
same connection: ``RuntimeError: reentrant call`` and a ``Py4JError`` are what the user then sees, and under Horovod's
launchers a rank "killed by SIGTERM" that reads like a lost executor. Here the first SIGINT cancels every Spark job
from a thread of its own (with the JVM's log off, so the tasks it cancels are not reported as errors). The main
thread is interrupted at once only when no Spark job was running (it runs Python code of its own); a thread waiting
for a job ends with it, so it is left to end by itself for ``GRACE_S`` (interrupting Horovod's launcher, which waits
for its job, can hang it: ``safe_shell_exec`` then waits for a process that has gone). Whatever the task body then
raises becomes ``InterruptedByUser``. A second Ctrl-C raises ``KeyboardInterrupt`` at once. Horovod's own Gloo
launcher, which takes SIGINT over to stop its ranks, keeps doing so, and the interruption is still seen. Horovod's
``mpirun`` (``horovod.spark.run`` with controller ``mpi``) runs in a session of its own, out of the terminal's reach:
it gets SIGTERM, which it takes as it takes Ctrl-C (see ``_stop_horovods_mpirun``).
"""

import _thread
import contextlib
import functools
import logging
import multiprocessing
import os
import signal
import threading
from typing import Any, Callable, Iterator

from horovod_flyte_runtime.errors import exit_quickly

from .errors import InterruptedByUser

GRACE_S = 10.0
QUIET_S = 1.0  # how late a thread's error is reported (see _Interrupt.report_later)
AFTER_S = 5.0  # how long after an interrupted task threads' errors are still not reported


class _Interrupt:
    """The SIGINT handler of one task's run, and what it saw."""

    def __init__(self):
        self.seen, self.left = threading.Event(), threading.Event()

    def handle(self, signum: int, frame: Any, main: bool = True) -> None:
        """The first SIGINT: cancel the Spark jobs, then (``main``) interrupt the main thread if it must be."""
        if self.seen.is_set():
            raise KeyboardInterrupt
        self.seen.set()
        threading.Thread(target=self._stop_spark, args=(main,), name="spark-interrupt", daemon=True).start()

    def report_later(self, hook: Callable) -> Callable:
        """A ``threading.excepthook`` that reports a thread's error a second late, and not at all once interrupted:
        the threads that Ctrl-C breaks (a pipe closed under Horovod's launcher) may fail before this handler runs."""
        def report(args: Any) -> None:
            _later(QUIET_S, lambda: None if self.seen.is_set() else hook(args))
        return report

    def _stop_spark(self, main: bool) -> None:
        from pyspark import SparkContext

        sc, waiting = SparkContext._active_spark_context, False
        if sc is not None:
            with contextlib.suppress(Exception):
                sc.setLogLevel("OFF")
                if main:
                    waiting = bool(sc.statusTracker().getActiveJobsIds())
                    sc.cancelAllJobs()
        if not main:  # Horovod's Gloo launcher stops its own job
            return
        _stop_horovods_mpirun()
        if not self.left.wait(GRACE_S if waiting else 0):
            _quiet_py4j()
            _thread.interrupt_main()


def _stop_horovods_mpirun() -> None:
    """SIGTERM to what runs under each multiprocessing child of this process that leads a session of its own: Horovod's
    ``safe_shell_exec`` runs ``mpirun`` under such a middleman (it calls ``setsid``), so Ctrl-C never reaches
    ``mpirun``, which would end only once Spark had killed the tasks its daemons run in (``docs/testing.md``). The
    middleman itself is spared: it reaps ``mpirun`` and still kills it should this process die."""
    import psutil

    for child in multiprocessing.active_children():
        with contextlib.suppress(OSError, psutil.Error):  # it may have ended meanwhile
            if os.getsid(child.pid) == child.pid:
                for process in psutil.Process(child.pid).children(recursive=True):
                    process.terminate()


def _quiet_py4j() -> None:
    """The interruption may land in py4j's socket read: py4j then logs it as its own error, on its loggers and on the
    root logger ("KeyboardInterrupt while sending command." with a traceback); the user's Ctrl-C is not one."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    logging.getLogger().addFilter(lambda record: not record.getMessage().startswith("KeyboardInterrupt while sending"))


def stops_spark_on_interrupt(execute: Callable) -> Callable:
    """``execute`` (a Spark task's) with the handling above while it runs in the main thread."""
    if getattr(execute, "stops_spark_on_interrupt", False):
        return execute

    @functools.wraps(execute)
    def guarded(task: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return execute(task, **kwargs)
        interrupt = _Interrupt()
        previous = signal.signal(signal.SIGINT, interrupt.handle)
        excepthook = threading.excepthook
        threading.excepthook = interrupt.report_later(excepthook)
        try:
            with _seen_through_horovods_handler(interrupt):
                return execute(task, **kwargs)
        except BaseException:
            if interrupt.seen.is_set():
                exit_quickly()
                raise InterruptedByUser(f"stopped the Spark jobs of task {task.name}") from None
            raise
        finally:
            interrupt.left.set()
            if interrupt.seen.is_set():  # threads broken by the interruption may fail a moment after the task
                _later(AFTER_S, setattr, threading, "excepthook", excepthook)
            else:
                threading.excepthook = excepthook
            signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)

    guarded.stops_spark_on_interrupt = True
    return guarded


def _later(seconds: float, fn: Callable, *args: Any) -> None:
    timer = threading.Timer(seconds, fn, args)
    timer.daemon = True
    timer.start()


@contextlib.contextmanager
def _seen_through_horovods_handler(interrupt: _Interrupt) -> Iterator[None]:
    """Horovod's Gloo launcher (``horovod.spark.run``, which a user's own ``SparkBackend`` runs) replaces the SIGINT handler
    with its own, which stops the ranks with SIGTERM ("rank 0 was killed by SIGTERM"): while this task runs, its
    handler also tells ``interrupt``."""
    from horovod.runner import gloo_run

    register = gloo_run.register_shutdown_event

    def register_and_tell() -> threading.Event:
        event = register()
        horovods = signal.getsignal(signal.SIGINT)

        def on_sigint(signum: int, frame: Any) -> None:
            with contextlib.suppress(KeyboardInterrupt):
                interrupt.handle(signum, frame, main=False)
            horovods(signum, frame)

        signal.signal(signal.SIGINT, on_sigint)
        return event

    gloo_run.register_shutdown_event = register_and_tell
    try:
        yield
    finally:
        gloo_run.register_shutdown_event = register
