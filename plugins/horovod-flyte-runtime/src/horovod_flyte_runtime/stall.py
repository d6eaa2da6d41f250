"""Ranks out of step: Horovod's stall check, read where it speaks, in rank 0's (the coordinator's) standard error.

Horovod's coordinator writes, from C++ straight to file descriptor 2, a report of the tensors some ranks submitted and
others did not ("One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks ...",
then ``Missing ranks:`` and a ``rank: [tensor, ...]`` line per missing rank, ``!`` marking the ranks past the shutdown
time, then "... Will shutdown."). ``StallWatch`` passes rank 0's descriptor 2 through a pipe, unchanged, and reads
those reports: the first is logged as a warning on rank 0's line, and the one that shuts Horovod down is recorded as
the job's failure (kind ``STALLED``) before any rank sees the shutdown as an error of its own.

No flytekit import: rank processes started by Spark tasks use this module.
"""

import contextlib
import logging
import os
import re
import select
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

logger = logging.getLogger("flytekitplugins.horovod")

STALL_MARKER = "submitted to be reduced, gathered or broadcasted by subset of ranks"
SHUTDOWN_MARKER = "Will shutdown."
IDLE_S = 0.5  # a report's lines come in one burst: this long without more, it is complete
_WARN_AFTER = re.compile(r"for more than (\d+) seconds")
_MISSING = re.compile(r"^(\d+)(!?): \[(.*)\]\s*$")
CAUSES = ("uneven batches per rank (a rank with more steps than the others), a rank-dependent branch around a "
          "collective, collectives submitted in a different order, or a rank stuck in its own code (a data loader "
          "that never yields)")


@dataclass
class StallReport:
    """One report of Horovod's stall check: the tensors each missing rank has not submitted, for how long at least."""

    warn_s: int
    seen_at: float  # when the report reached this process (time.time)
    missing: Dict[int, List[str]] = field(default_factory=dict)
    shutdown: bool = False

    def describe(self, size: int, first_seen: float) -> str:
        """``tensor(s) X: rank 1 missing, rank 0 waiting; since hh:mm:ss`` for every missing rank."""
        parts = []
        for rank, tensors in sorted(self.missing.items()):
            waiting = [r for r in range(size) if r != rank and not set(tensors) & set(self.missing.get(r, ()))]
            parts.append(f"rank {rank} never submitted {', '.join(tensors)} (submitted by {_ranks(waiting)})")
        since = time.strftime("%H:%M:%S", time.gmtime(first_seen - self.warn_s))
        return f"{'; '.join(parts)}; out of step since {since} UTC or earlier"


def _ranks(ranks: List[int]) -> str:
    if not ranks:
        return "no rank"
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


class StallParser:
    """Reads Horovod's stall reports from lines of rank 0's standard error; calls ``on_report`` for each."""

    def __init__(self, on_report: Callable[[StallReport], None]):
        self.on_report = on_report
        self._report: Optional[StallReport] = None

    def line(self, text: str) -> None:
        if STALL_MARKER in text:
            self._finish()
            found = _WARN_AFTER.search(text)
            self._report = StallReport(int(found.group(1)) if found else 0, time.time())
            return
        if self._report is None:
            return
        found = _MISSING.match(text.strip())
        if found:
            self._report.missing[int(found.group(1))] = [t.strip() for t in found.group(3).split(", ")]
            self._report.shutdown |= found.group(2) == "!"
        elif SHUTDOWN_MARKER in text:
            self._report.shutdown = True
            self._finish()
        elif not text.strip().startswith("Missing ranks:") and self._report.missing:
            self._finish()

    def idle(self) -> None:
        """Nothing more came for a moment: a report's ``rank: [...]`` lines all come at once, so it is complete."""
        if self._report is not None and self._report.missing:
            self._finish()

    def _finish(self) -> None:
        report, self._report = self._report, None
        if report is not None and report.missing:
            self.on_report(report)


class StallWatch:
    """Rank 0's file descriptor 2 through a pipe (every byte passed on to where it went before), its lines read by a
    ``StallParser``: the first report logged as a warning naming the tensors and ranks, the shutdown recorded with
    ``record(text)``, the error's first line. ``stop`` puts descriptor 2 back and passes on what is left."""

    def __init__(self, size: int, host: str, timeout: int, record: Callable[[str], None]):
        self.size, self.host, self.timeout, self.record = size, host, timeout, record
        self.first_seen: Optional[float] = None
        self._parser = StallParser(self._on_report)
        self._saved = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self._thread = threading.Thread(target=self._pump, args=(read_end,), name="horovod-stall-watch", daemon=True)
        self._thread.start()

    def _pump(self, read_end: int) -> None:
        pending = b""
        with contextlib.suppress(OSError):
            while True:
                if not select.select([read_end], [], [], IDLE_S)[0]:
                    self._parser.idle()
                    continue
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                os.write(self._saved, chunk)
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self._parser.line(line.decode("utf-8", "replace"))
        os.close(read_end)

    def _on_report(self, report: StallReport) -> None:
        first = self.first_seen is None
        self.first_seen = self.first_seen or report.seen_at
        what = report.describe(self.size, self.first_seen)
        if report.shutdown:
            self.record(f"Horovod ranks out of step for more than {self.timeout} s (stall_timeout), stopped by "
                        f"Horovod's stall check on rank 0 on {self.host}: {what}. This is usually {CAUSES}; a retry "
                        "would stall the same way")
        elif first:
            logger.warning("ranks out of step for more than %d s: %s; the task fails if they still are after "
                           "stall_timeout=%d s", report.warn_s, what, self.timeout)

    def stop(self) -> None:
        """Descriptor 2 back to where it went; wait until what was written before is passed on."""
        if self._thread.is_alive():
            os.dup2(self._saved, 2)  # the pipe's last write end closes: the pump reads what is left, then ends
            self._thread.join(timeout=0.5)  # a child process holding the pipe keeps it open: pass on, not wait
