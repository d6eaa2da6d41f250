"""Live progress of a Horovod task in its Flyte 2 report: rank 0's lines, as the ranks print them, in a "Horovod" tab
flushed while the ranks run (``@env.task(report=True)``), headed by how far training is where rank 0 prints epoch
lines (Keras's ``Epoch 3/20``, or ``epoch 3/20: ...``): epochs done of total, seconds an epoch, about how long is
left, a curve of each metric the epoch lines carry (``loss 0.1234``, ``backtest RMSPE: 0.12``, ``val_loss=0.2``,
separated by commas or `` - ``), and the epoch lines as a table.
"""

import asyncio
import html
import re
import threading
import time
from typing import Dict, List, Optional, Tuple

import flyte.report

TAB = "Horovod"
EVERY_S = 1.0  # the longest a rank 0 line waits before the report is flushed
KEPT_LINES = 400  # the last lines shown; the rank log has them all
_EPOCH = re.compile(r"\bepoch (\d+)\s*/\s*(\d+)", re.IGNORECASE)
_PIECES = re.compile(r"\s*(?:,|;|\s-\s)\s*")  # what separates the metrics on an epoch line
_METRIC = re.compile(r"([A-Za-z][A-Za-z0-9_ ]*?)\s*[:=]?\s+(-?\d+\.\d+(?:[eE][-+]?\d+)?)")
CURVE_W, CURVE_H = 360, 110  # pixels of one metric's curve


class ReportProgress:
    """Collects rank 0's lines (``add``, from the launcher's output thread) and publishes them to the task's report
    (``follow``, in the task's event loop, where the report lives)."""

    def __init__(self) -> None:
        self._lines: List[str] = []
        self._epochs: List[Tuple[int, int, float, str]] = []  # (epoch, of, when it was printed, the line)
        self._lock = threading.Lock()
        self._published = 0
        self._started = time.monotonic()

    def add(self, line: str) -> None:
        found = _EPOCH.search(line)
        with self._lock:
            self._lines.append(line)
            if found:
                self._epochs.append((int(found.group(1)), int(found.group(2)), time.monotonic(), line.strip()))

    async def follow(self, launch: "asyncio.Future") -> None:
        """Flush the report whenever rank 0 printed something new, until ``launch`` is done, then once more."""
        while not launch.done():
            await asyncio.wait({launch}, timeout=EVERY_S)
            await self.publish()

    async def publish(self) -> None:
        with self._lock:
            if len(self._lines) == self._published:
                return
            self._published = len(self._lines)
            page = self.html()
        flyte.report.get_tab(TAB).replace(page)
        await flyte.report.flush.aio()

    def html(self) -> str:
        """The tab: how far training is (where there are epoch lines), their table, then rank 0's last lines."""
        parts = []
        status = self.status()
        if status:
            parts.append(f"<h3>{html.escape(status)}</h3>")
            rows = "".join(f"<tr><td>{epoch}/{total}</td><td>{html.escape(line)}</td></tr>"
                           for epoch, total, _, line in self._epochs)
            parts.extend(curve(name, points) for name, points in self.metrics().items() if len(points) > 1)
            parts.append(f"<table><tr><th>epoch</th><th>rank 0</th></tr>{rows}</table>")
        shown = self._lines[-KEPT_LINES:]
        parts.append(f"<h4>rank 0 (last {len(shown)} of {len(self._lines)} lines)</h4>"
                     f"<pre>{html.escape(chr(10).join(shown))}</pre>")
        return "\n".join(parts)

    def metrics(self) -> Dict[str, List[Tuple[int, float]]]:
        """Each metric the epoch lines carry, as (epoch, value) in the order printed."""
        found: Dict[str, List[Tuple[int, float]]] = {}
        for epoch, _, _, line in self._epochs:
            tail = line[_EPOCH.search(line).end():].lstrip(" :")
            for piece in _PIECES.split(tail):
                metric = _METRIC.match(piece)
                if metric:
                    found.setdefault(metric.group(1), []).append((epoch, float(metric.group(2))))
        return found

    def status(self) -> Optional[str]:
        """"epoch 3 of 20 done, 0.6 s an epoch, about 10 s left", or None before any epoch line."""
        if not self._epochs:
            return None
        epoch, total, when, _ = self._epochs[-1]
        first_epoch, _, first_when, _ = self._epochs[0]
        if epoch > first_epoch:
            per_epoch = (when - first_when) / (epoch - first_epoch)
        else:  # one epoch line so far: it took the time since the ranks started
            per_epoch = (when - self._started) / max(epoch, 1)
        left = max(total - epoch, 0) * per_epoch
        return f"epoch {epoch} of {total} done, {per_epoch:.1f} s an epoch, about {left:.0f} s left"


def curve(name: str, points: List[Tuple[int, float]]) -> str:
    """An inline SVG line of ``points`` (epoch, value), with the metric's name, its last value and its range."""
    epochs, values = [e for e, _ in points], [v for _, v in points]
    low, high = min(values), max(values)
    span_e, span_v = max(max(epochs) - min(epochs), 1), (high - low) or 1.0
    xy = " ".join(f"{10 + (e - min(epochs)) * (CURVE_W - 20) / span_e:.1f},"
                  f"{CURVE_H - 10 - (v - low) * (CURVE_H - 30) / span_v:.1f}" for e, v in points)
    label = html.escape(f"{name}: {values[-1]:.4g} at epoch {epochs[-1]} (from {low:.4g} to {high:.4g})")
    return (f'<svg class="metric" width="{CURVE_W}" height="{CURVE_H}" role="img" aria-label="{label}">'
            f'<text x="10" y="14" font-size="12">{label}</text>'
            f'<polyline fill="none" stroke="#3b6ea8" stroke-width="2" points="{xy}"/></svg>')
