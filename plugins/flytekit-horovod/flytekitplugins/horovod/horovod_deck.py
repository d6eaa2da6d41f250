"""The "Horovod" Deck of a training task: every rank's output (the log files of ``rank_output``), the Horovod
timeline's totals per activity (when ``Horovod(timeline_filename=...)`` is set) and the autotune log (when
``Horovod(autotune=True, autotune_log_file=...)`` is set)."""

import collections
import csv
import glob
import html
import json
import os
from typing import Dict, List, Optional, Tuple

from horovod_flyte_runtime.autotune import untried
from horovod_flyte_runtime.rank_output import log_dir
from horovod_flyte_runtime.settings import Horovod

LOG_TAIL_LINES = 400  # per log file in the Deck; the whole file stays in the task's log folder


def add_horovod_deck(settings: Horovod) -> None:
    """Add the Deck to the running task (shown when the task has ``enable_deck=True``), if there is anything to show."""
    import flytekit

    sections = [_logs_section(path) for path in sorted(glob.glob(os.path.join(log_dir() or "", "ranks-*.log")))]
    if settings.timeline_filename:
        sections.append(_timeline_section(settings.timeline_filename))
    if settings.autotune_log_file:
        sections.append(_autotune_section(settings.autotune_log_file))
    if sections:
        flytekit.Deck("Horovod", "\n".join(sections))


def _logs_section(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = collections.deque(f, maxlen=LOG_TAIL_LINES)
    return (f"<h3>Every rank's output</h3><p>{link(path)} (last {len(lines)} lines)</p>"
            f"<pre>{html.escape(''.join(lines))}</pre>")


def link(path: str) -> str:
    """A link to a file: a local path (``file://``) or a URL (a cluster task's raw output prefix)."""
    url = path if "://" in path else f"file://{os.path.abspath(path)}"
    return f'<a href="{html.escape(url)}">{html.escape(path)}</a>'


def timeline_totals(path: str) -> Dict[str, Tuple[int, float]]:
    """Activity name -> (how many times, total milliseconds) in a Horovod timeline (Chrome trace JSON, which Horovod
    leaves without its closing bracket while it writes)."""
    with open(path, encoding="utf-8") as f:
        text = f.read().strip().rstrip(",")
    events = json.loads(text if text.endswith("]") else text + "]")
    open_events: Dict[int, List[Tuple[str, float]]] = collections.defaultdict(list)  # by tensor (pid)
    totals: Dict[str, List[float]] = collections.defaultdict(lambda: [0, 0.0])
    for event in events:
        phase = event.get("ph")
        if phase == "B":
            open_events[event["pid"]].append((event["name"], event["ts"]))
        elif phase == "E" and open_events[event["pid"]]:
            name, began = open_events[event["pid"]].pop()
            totals[name][0] += 1
            totals[name][1] += (event["ts"] - began) / 1000.0
    return {name: (int(count), ms) for name, (count, ms) in totals.items()}


def _timeline_section(path: str) -> str:
    head = f"<h3>Horovod timeline</h3><p>{link(path)}"
    if not os.path.exists(path):
        return head + ": not on this host (rank 0 writes it where it runs)</p>"
    try:
        totals = timeline_totals(path)
    except ValueError as exc:
        return head + f": not readable as a timeline ({html.escape(str(exc))})</p>"
    rows = "".join(f"<tr><td>{html.escape(name)}</td><td>{count}</td><td>{ms:.1f}</td></tr>"
                   for name, (count, ms) in sorted(totals.items(), key=lambda item: -item[1][1]))
    return (head + " (open it in chrome://tracing or Perfetto)</p><table><tr><th>activity</th><th>times</th>"
            f"<th>total ms</th></tr>{rows}</table>")


def _autotune_section(path: str) -> str:
    head = f"<h3>Horovod autotune log</h3><p>{link(path)}"
    rows: Optional[List[List[str]]] = None
    if os.path.exists(path):
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    if not rows:
        return head + ": nothing written on this host (rank 0 writes it where it runs)</p>"
    news = untried(path)
    if news:
        return head + f": {html.escape(news)}</p>"
    cells = "".join("<tr>" + "".join(f"<{tag}>{html.escape(cell)}</{tag}>" for cell in row) + "</tr>"
                    for tag, row in [("th", rows[0])] + [("td", r) for r in rows[1:]])
    return head + f" ({len(rows) - 1} configurations tried)</p><table>{cells}</table>"
