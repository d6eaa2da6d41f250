"""The Rossmann workflow at the real data's size: ``pyflyte run workflows/rossmann.py wf`` on synthetic data of
1,115 stores, 2013-01-01..2015-07-31 (about 1.0M training rows, 41,088 test rows), as a user runs it.

Reports the wall time of the whole run and of each task (from the tasks' own ``[task] done in N s`` lines), the
peak resident memory summed over every process of the run (pyflyte, Spark's JVM and Python workers, the ranks),
sampled twice a second, and the forecast scores the run prints. The baseline is the default run (50 stores) in
the same script, so the ratios say how the run scales with 22x the data.

    .venv/bin/python -m bench.full_size                 # default run, then the full-size run
    .venv/bin/python -m bench.full_size --epochs 10     # the full-size run's epochs (default: the workflow's)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

import psutil

from bench._common import ROOT, VENV_BIN, header, parser, save

FULL = {"n_stores": 1115}
TIMEOUT_S = 3600
TASK_LINE = re.compile(r"\[(\w+)\] done in ([\d.]+) s")
OUTPUTS = re.compile(r"Outputs\(model=(\S+), predictions=(\S+)\)")
SUMMARY = re.compile(r"backtest RMSPE ([\d.]+) \(perfect model ([\d.]+), [\d.]+x\); test RMSPE ([\d.]+) "
                     r"\(perfect model ([\d.]+)")


def tree_rss(root: psutil.Process) -> int:
    """Resident bytes of ``root`` and every descendant."""
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total


def measured(args: List[str], log_path: Path, cwd: Path = ROOT) -> Dict:
    """Run a command (its own process group, output to ``log_path``): wall time, peak RSS of its process tree,
    output; it must exit 0."""
    started = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(args, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        root, peak, done = psutil.Process(proc.pid), [0], threading.Event()

        def sample() -> None:
            while not done.wait(0.5):
                peak[0] = max(peak[0], tree_rss(root))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            code = proc.wait(timeout=TIMEOUT_S)
        except BaseException:  # timeout or Ctrl-C: end what this run started (its process group), then re-raise
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            done.set()
            sampler.join()
    wall = time.monotonic() - started
    output = log_path.read_text(errors="replace")
    if code != 0:
        raise SystemExit(f"{' '.join(args[:4])} ... failed ({code}); see {log_path}:\n{output[-3000:]}")
    return {"wall_s": round(wall, 1), "peak_rss_gib": round(peak[0] / 2**30, 2), "output": output}


def run_wf(hp: Dict, log_path, data_dir: Optional[Path] = None) -> Dict:
    """One ``pyflyte run ... wf --hp <hp> [--data_dir <data_dir>]``: wall time, per-task seconds, peak RSS of the
    process tree, the scores it printed, and its model and predictions folders."""
    args = [str(VENV_BIN / "pyflyte"), "run", "workflows/rossmann.py", "wf", "--hp", json.dumps(hp)]
    if data_dir is not None:
        args += ["--data_dir", str(data_dir)]
    ran = measured(args, Path(log_path))
    wall, peak, output = ran["wall_s"], ran["peak_rss_gib"], ran["output"]
    tasks = {name: float(seconds) for name, seconds in TASK_LINE.findall(output)}
    scores: Optional[List[str]] = (SUMMARY.search(output).groups() if SUMMARY.search(output) else None)
    result = {"hp": hp, "wall_s": wall, "tasks_s": tasks, "peak_rss_gib": peak}
    if scores:
        result.update(backtest_rmspe=float(scores[0]), backtest_perfect=float(scores[1]),
                      test_rmspe=float(scores[2]), test_perfect=float(scores[3]))
    outputs = OUTPUTS.search(output)
    if outputs:
        result["model"], result["predictions"] = outputs.groups()
    print(f"{json.dumps(hp)}: {result['wall_s']} s, tasks {tasks}, peak RSS {result['peak_rss_gib']} GiB, "
          f"scores {scores}", flush=True)
    return result


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=None, help="epochs of the full-size run")
    opts = p.parse_args()
    header("Rossmann wf at full size vs the default run", opts.quick)
    logs = ROOT / ".cache" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    baseline = run_wf({}, logs / "full_size_default.log")
    full = run_wf({**FULL, **({"epochs": opts.epochs} if opts.epochs else {})}, logs / "full_size.log")
    print(f"RATIO full-size / default wall time: {full['wall_s'] / baseline['wall_s']:.2f}x; peak RSS "
          f"{full['peak_rss_gib']} GiB vs {baseline['peak_rss_gib']} GiB")
    save("full_size", {"default": baseline, "full": full})


if __name__ == "__main__":
    main()
