"""Where the ranks' output goes: every line into a log file, to the console rank 0's lines only (every rank's with
``Horovod(verbose=True)`` or ``FLYTE_HOROVOD_VERBOSE=1``), plus lines that come from no rank (the launcher's), less
the known native start-up lines (``native_lines``; the log keeps them).

Lines arrive as Horovod's launchers write them, prefixed by rank: ``[1]<stdout>:`` (Gloo, ``horovodrun``,
``horovod.spark``) or ``[1,1]<stderr>:`` (``mpirun --tag-output``). No flytekit import at module level.
"""

import collections
import contextlib
import os
import sys
import tempfile
import threading
import time
from typing import Callable, Deque, Optional

from .classify import NO_SPACE, rank_of, rank_text
from .native_lines import is_native_noise

VERBOSE_ENV = "FLYTE_HOROVOD_VERBOSE"  # "1": every rank's output on the console too
LOG_DIR_NAME = "horovod-logs"  # under a Flyte task's working directory: the ranks' logs of that task
RANK_TAIL_LINES = 20  # how many of a rank's last lines ``last_lines`` keeps: a traceback's end, Open MPI's abort


class RankOutput:
    """One launch's output sink; ``stream("stdout")`` / ``stream("stderr")`` are the text streams to hand to a
    launcher (``horovod.spark.run(stdout=..., stderr=...)``, ``prefix_connection``). ``on_rank0_line``, where given,
    gets each line rank 0 prints, without its prefix, as it arrives (a task's live progress); ``last_lines(rank)``
    is what a rank printed last, for the error of a rank that failed without a record of its own."""

    def __init__(self, path: str, verbose: bool, on_rank0_line: Optional[Callable[[str], None]] = None):
        self.path, self.verbose, self.on_rank0_line = path, verbose, on_rank0_line
        self.no_space: Optional[str] = None  # the first line a rank printed about a full disk (see disk_full.py)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._file = open(path, "a", encoding="utf-8", errors="replace")
        self._lock = threading.Lock()

    @classmethod
    def for_launch(cls, verbose: bool, on_rank0_line: Optional[Callable[[str], None]] = None) -> "RankOutput":
        """A new log file: in the running Flyte task's working directory (see ``log_dir``), else a temporary one."""
        verbose = verbose or os.environ.get(VERBOSE_ENV, "") == "1"
        folder = log_dir() or tempfile.mkdtemp(prefix="horovod-logs-")
        os.makedirs(folder, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=f"ranks-{time.strftime('%H%M%S')}-", suffix=".log", dir=folder)
        os.close(fd)
        return cls(path, verbose, on_rank0_line)

    def write(self, text: str, console: str = "stdout") -> None:
        with self._lock:
            if self.no_space is None and NO_SPACE in text:
                self.no_space = next(line for line in text.splitlines() if NO_SPACE in line)
            if not self._file.closed:
                with contextlib.suppress(OSError):  # a full disk: the console still shows the lines
                    self._file.write(text)
            shown = text if self.verbose else "".join(
                line for line in text.splitlines(keepends=True)
                if rank_of(line) in (None, 0) and not is_native_noise(line))
            if shown:
                with contextlib.suppress(Exception):
                    getattr(sys, console).write(shown)
            if self.on_rank0_line is not None:
                for line in text.splitlines():
                    if rank_of(line) == 0:
                        self.on_rank0_line(rank_text(line))

    def last_lines(self, rank: int) -> str:
        """The last lines rank ``rank`` printed (up to ``RANK_TAIL_LINES``, without their prefix and the known native
        start-up lines), read back from the log: asked only when a rank failed, it costs the lines nothing."""
        with self._lock:
            if not self._file.closed:
                with contextlib.suppress(OSError):
                    self._file.flush()
        tail: Deque[str] = collections.deque(maxlen=RANK_TAIL_LINES)
        with contextlib.suppress(OSError), open(self.path, encoding="utf-8", errors="replace") as log:
            tail.extend(rank_text(line).rstrip("\n") for line in log
                        if rank_of(line) == rank and not is_native_noise(line))
        return "\n".join(tail)

    def stream(self, console: str) -> "_Stream":
        return _Stream(self, console)

    def close(self) -> None:
        with self._lock:
            self._file.close()


class _Stream:
    """A text stream writing into a ``RankOutput``, shown on ``console`` (``stdout`` or ``stderr``)."""

    def __init__(self, output: RankOutput, console: str):
        self.output, self.console = output, console

    def write(self, text: str) -> int:
        self.output.write(text, self.console)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            getattr(sys, self.console).flush()


def log_dir() -> Optional[str]:
    """``<working directory>/horovod-logs`` of the running Flyte task, or None outside one."""
    try:
        import flytekit

        return os.path.join(str(flytekit.current_context().working_directory), LOG_DIR_NAME)
    except Exception:  # no flytekit context here
        return None
