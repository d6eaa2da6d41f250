"""Supervising the processes of one launch: output forwarded line by line with a rank prefix, stopped together.

Every process gets its own session (so stopping it stops whatever it started) and, where asked, dies with its
launcher (Linux ``PR_SET_PDEATHSIG``). Output goes through Horovod's own ``prefix_connection`` (``[1]<stdout>:``
lines, as ``horovodrun`` prints them); the last lines of each process are kept for the error report.
"""

import collections
import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, TypeVar

from horovod.runner.common.util.safe_shell_exec import GRACEFUL_TERMINATION_TIME_S, prefix_connection

from .classify import describe_status
from .rank_output import RankOutput

PARENT_PID_ENV = "FLYTE_HOROVOD_PARENT_PID"  # the launcher of a rank process; the rank exits when it is gone
TAIL_LINES = 40
SETTLE_S = 3.0  # after a process failed, how long the others may take to end by themselves and say why
_PR_SET_PDEATHSIG = 1


def pdeathsig_setter(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A function that asks Linux to send ``sig`` to the calling process when its parent dies.

    Resolved here (ctypes loaded, symbol looked up) so that calling it in a forked child before ``exec``
    needs no import and no lock. A no-op where ``prctl`` is unavailable.
    """
    if not sys.platform.startswith("linux"):
        return lambda: None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return lambda: None
    return lambda: prctl(_PR_SET_PDEATHSIG, int(sig))


Launch = TypeVar("Launch", bound=Callable[..., Any])


def stopped_by_sigterm(launch: Launch) -> Launch:
    """``launch`` (in the main thread) taking SIGTERM (a ``timeout``, a scheduler, the kubelet) as Ctrl-C:
    ``SystemExit``, so that its ranks are stopped and its job folder removed, where SIGTERM's default action would end
    the process at once."""
    def on_sigterm(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    @functools.wraps(launch)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return launch(*args, **kwargs)
        previous = signal.signal(signal.SIGTERM, on_sigterm)
        try:
            return launch(*args, **kwargs)
        finally:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)

    return guarded  # type: ignore[return-value]


def die_with_launcher() -> None:
    """In a rank process: exit when the launcher that started it is gone (now, or whenever it goes). SIGKILL, not
    SIGTERM: a rank that is stopped (frozen, SIGSTOP) would keep a SIGTERM pending forever."""
    pdeathsig_setter(signal.SIGKILL)()
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and os.getppid() != int(parent):  # the launcher died before the line above took effect
        os._exit(1)


class _Tee:
    """A text stream for ``prefix_connection``: writes to ``output`` (else this process's stdout/stderr) and keeps
    the last lines."""

    def __init__(self, stream: str, tail: Deque[str], output: Optional[RankOutput] = None):
        self.stream, self.tail, self.output = stream, tail, output
        self.in_line = False  # the last text written did not end its line

    def write(self, text: str) -> None:
        if text:
            self.in_line = not text.endswith("\n")
        self.tail.append(text)
        if self.output is not None:
            self.output.write(text, self.stream)
            return
        with contextlib.suppress(Exception):
            getattr(sys, self.stream).write(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            getattr(sys, self.stream).flush()


class Processes:
    """The processes of one launch, started, watched and stopped together; their output goes to ``output``
    (every line to its log file, rank 0's to the console), else straight to this process's stdout/stderr."""

    def __init__(self, output: Optional[RankOutput] = None):
        self.output = output
        self.procs: List[subprocess.Popen] = []
        self.names: List[str] = []
        self.tails: List[Deque[str]] = []
        self._threads: List[threading.Thread] = []

    def start(self, name: str, args: List[str], env: Dict[str, str], prefix: Optional[str],
              die_with_parent: bool = False, stdin: Optional[bytes] = None, pass_fds=(),
              enter: Optional[Callable[[], None]] = None) -> subprocess.Popen:
        """Start one process; ``prefix`` (e.g. ``"1"``) makes its lines ``[1]<stdout>:...`` as horovodrun's.

        ``stdin`` bytes are written to the process's standard input, which is then closed. ``enter`` runs in the
        child before ``exec`` (``own_network``'s namespace).
        """
        # die_with_parent: for a launcher that is not Python (mpirun)
        steps = [step for step in (enter, pdeathsig_setter() if die_with_parent else None) if step is not None]
        preexec = (lambda: [step() for step in steps]) if steps else None
        proc = subprocess.Popen(args, env=env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=preexec, pass_fds=pass_fds)
        tail: Deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.procs.append(proc)
        self.names.append(name)
        self.tails.append(tail)
        for pipe, stream in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
            thread = threading.Thread(target=_forward, daemon=True, name=f"horovod-{name}-{stream}",
                                      args=(pipe, _Tee(stream, tail, self.output), stream if prefix is not None else None, prefix))
            thread.start()
            self._threads.append(thread)
        if stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(stdin)
            proc.stdin.close()
        return proc

    def wait(self, poll: float = 0.02, on_exit: Optional[Callable[[int, int], None]] = None,
             settled: Callable[[], bool] = lambda: True, settle_s: float = SETTLE_S,
             give_up: Callable[[], bool] = lambda: False) -> Optional[Tuple[int, int]]:
        """Wait until all exited; at the first non-zero exit stop the others and return (index, exit code).

        ``give_up()`` (asked once a second) ending the wait stops every process and returns (0, -SIGTERM): the job
        failed while its processes run on (an elastic job that would run a stalled step again).

        ``on_exit(index, code)`` is called for every process that exited non-zero by itself, before the others are
        stopped, so whoever watches can record which process really failed. After the first, the others are left
        up to ``settle_s`` s to end by themselves, until ``settled()`` says the failure is attributed: which of two
        processes that fail together is seen first must not decide which is blamed.
        """
        try:
            seen: Dict[int, int] = {}
            deadline, ask_at = None, time.monotonic() + 1
            while True:
                if time.monotonic() > ask_at:
                    ask_at = time.monotonic() + 1
                    if give_up():
                        self.stop()
                        return 0, -signal.SIGTERM
                codes = [p.poll() for p in self.procs]
                for index, code in enumerate(codes):
                    if code not in (None, 0) and index not in seen:
                        seen[index] = code
                        if on_exit is not None:
                            on_exit(index, code)
                if seen:
                    deadline = deadline or time.monotonic() + settle_s
                    if settled() or None not in codes or time.monotonic() > deadline:
                        first = next(iter(seen.items()))
                        self.stop()
                        return first
                elif all(c == 0 for c in codes):
                    return None
                time.sleep(poll)
        finally:
            self.stop()

    def stop(self, grace: float = GRACEFUL_TERMINATION_TIME_S) -> None:
        """SIGTERM every process group still running, SIGKILL after ``grace`` s; finish forwarding output."""
        alive = [p for p in self.procs if p.poll() is None]
        for proc in alive:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            _signal_group(proc, signal.SIGKILL)  # also anything a finished process left behind
            if proc.poll() is None:
                proc.wait()
            _kill_session(proc.pid)  # and in groups of their own: mpirun puts each rank in one
        for thread in self._threads:
            thread.join(timeout=2)

    def finished_output(self, index: int) -> str:
        """Process ``index``'s last output lines, once it has exited and all its output is forwarded."""
        self.procs[index].wait()
        for thread in self._threads[2 * index:2 * index + 2]:
            thread.join(timeout=2)
        return "".join(self.tails[index])

    def describe_exit(self, index: int, code: int) -> str:
        tail = "".join(self.tails[index]).rstrip()
        text = f"{self.names[index]} {describe_status(code)}"
        return f"{text}; its last output:\n{tail}" if tail else text


def _forward(pipe, tee: _Tee, stream: Optional[str], prefix: Optional[str]) -> None:
    """Horovod's ``prefix_connection``; should it stop (it decodes strictly), drain the pipe so no child blocks."""
    try:
        prefix_connection(pipe, tee, stream, prefix, False)
        if tee.in_line:  # a process that ended mid-line (killed): what is written next starts a line of its own
            tee.write("\n")
    except Exception:
        with contextlib.suppress(Exception):
            while chunk := os.read(pipe.fileno(), 65536):
                tee.write(chunk.decode("utf-8", errors="replace"))
            pipe.close()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _kill_session(sid: int) -> None:
    """SIGKILL every process left in session ``sid`` (each process here starts one; a rank that mpirun put in a group
    of its own is still in it, and outlives a mpirun that was killed, in a cluster rank without a death signal)."""
    with contextlib.suppress(OSError):
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
                if int(fields[3]) == sid:
                    os.kill(int(entry), signal.SIGKILL)
            except (OSError, ValueError, IndexError):
                continue
