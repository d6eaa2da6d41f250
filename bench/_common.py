"""Shared helpers of the benchmark scripts: arguments, timing, tables, the machine, cached data sets.

Every script measures its baseline in the same run, on the same machine, repeats each measurement
(round-robin, so a noisy moment hits every contestant alike), and reports medians plus every repetition.
Results are also written as JSON to ``.cache/bench/results/<name>.json`` (docs/performance.md quotes them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # `python bench/x.py` as well as `python -m bench.x`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import ROOT, VENV_BIN  # noqa: E402 (importable once the root is on sys.path)

CACHE = ROOT / ".cache" / "bench"
PYTHON = sys.executable
# ... and in every process started from here (ranks, Spark's Python workers), so `bench` imports there too.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)

# Quiet TensorFlow's C++ start-up banner in this process and every child (it is noise in the tables).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # horovodrun, pyflyte


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="a fast sanity run: small sizes, fewer repetitions")
    p.add_argument("--reps", type=int, default=None, help="repetitions per contestant (default: per script)")
    return p


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def fmt(value: float, digits: int = 2) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table (it reads fine in a terminal too)."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def round_robin(contestants: Dict[str, Callable[[], float]], reps: int, log=print) -> Dict[str, List[float]]:
    """Run each contestant ``reps`` times, interleaved; each call returns its own measured value."""
    samples: Dict[str, List[float]] = {name: [] for name in contestants}
    for rep in range(reps):
        for name, measure in contestants.items():
            value = measure()
            samples[name].append(value)
            log(f"  rep {rep + 1}/{reps} {name}: {value:.3f}")
    return samples


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_wall(args: List[str], env: Optional[Dict[str, str]] = None, cwd: Path = ROOT, timeout: float = 600,
             expect: Optional[str] = None) -> float:
    """Wall time of a command (output captured; it must exit 0 and, if given, print ``expect``)."""
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    seconds = time.perf_counter() - start
    if proc.returncode != 0 or (expect is not None and expect not in proc.stdout):
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    return seconds


def process_result(code: str, *args: str, env: Dict[str, str]) -> Dict[str, Any]:
    """Run ``code`` in a fresh ``python -c`` with ``args`` and ``env`` on top of this environment; the JSON it prints
    on its ``RESULT `` line (it must exit 0)."""
    ran = subprocess.run([PYTHON, "-c", code, *args], env={**os.environ, **env}, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, timeout=600, check=True)
    return json.loads(next(line for line in ran.stdout.splitlines() if line.startswith("RESULT "))[len("RESULT "):])


def load_average() -> float:
    return os.getloadavg()[0]


def machine() -> Dict[str, Any]:
    """What the numbers were measured on."""
    info: Dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    try:
        lscpu = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        fields = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
        info["cpu"] = fields.get("Model name", "?").strip()
        info["cpus"] = int(fields.get("CPU(s)", "0").strip() or 0)
    except OSError:
        info["cpus"] = os.cpu_count()
    with open("/proc/meminfo") as f:
        info["ram_gib"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    versions = {}
    for module in ("tensorflow", "horovod", "pyspark", "flytekit", "pyarrow", "numpy", "pandas"):
        try:
            versions[module] = __import__(module).__version__
        except Exception:  # not importable here: not part of this benchmark
            pass
    info["versions"] = versions
    try:
        info["mpirun"] = subprocess.run(["mpirun", "--version"], stdout=subprocess.PIPE, text=True).stdout.splitlines()[0]
    except OSError:
        pass
    info["load_average_at_start"] = round(load_average(), 2)
    info["other_busy_processes_at_start"] = busy_processes()
    return info


def save(name: str, result: Dict[str, Any]) -> Path:
    path = CACHE / "results" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": name, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), **result}
    path.write_text(json.dumps(result, indent=1, default=str))
    return path


def busy_processes(threshold: float = 10.0) -> List[str]:
    """Other processes using more than ``threshold`` % CPU right now (not this one): they make timings noisy."""
    out = subprocess.run(["ps", "-eo", "pid=,pcpu=,args="], stdout=subprocess.PIPE, text=True).stdout
    busy = []
    for line in out.splitlines():
        pid, cpu, args = line.split(None, 2)
        if int(pid) != os.getpid() and float(cpu) > threshold and not args.startswith("ps "):
            busy.append(f"{cpu}% {args[:100]}")
    return busy


def header(title: str, quick: bool) -> None:
    print(f"\n=== {title}{' (--quick)' if quick else ''} ===", flush=True)
    busy = busy_processes()
    print(f"load average {load_average():.2f}; other busy processes: {len(busy)}", flush=True)
    for line in busy[:5]:
        print(f"note: busy: {line} (timings will be noisy)", flush=True)


def spark_session(master: str = "local[2]", **conf: str):
    """The local SparkSession of the workflow's Spark tasks (tests.support.spark) on ``master``'s slots, by default
    the 2 CPUs the prepare task's pod requests (a local run gets every core of the machine)."""
    from tests.support.spark import local_spark

    return local_spark("bench", spark_master=master, spark_driver_host="127.0.0.1", **conf)


# --- cached data sets --------------------------------------------------------------------------------------

FULL = dict(n_stores=1115, start="2013-01-01", end="2015-07-31")  # the real data's size and date range
QUICK = dict(n_stores=60, start="2014-06-01", end="2015-07-31")


def synthetic_data(quick: bool) -> Path:
    """The synthetic input CSVs (full size, or small with --quick), generated once and cached."""
    from rossmann import synthetic

    size = QUICK if quick else FULL
    path = CACHE / "data" / ("synthetic-quick" if quick else "synthetic-full")
    if not (path / "test.csv").exists():
        print(f"generating synthetic data {size} -> {path}", flush=True)
        synthetic.generate(str(path), seed=0, **size)
    return path


def prepared_path(quick: bool) -> Path:
    return CACHE / "data" / ("prepared-quick" if quick else "prepared-full")


def prepared_data(quick: bool, spark=None) -> Path:
    """The prepared (features.prepare) version of ``synthetic_data``, made once and cached."""
    path = prepared_path(quick)
    if not (path / "metadata.json").exists():
        from rossmann import data as rdata
        from rossmann import features

        own = spark is None
        spark = spark or spark_session()
        print(f"preparing {path} (once; cached for the next runs)", flush=True)
        features.prepare(spark, rdata.load(spark, str(synthetic_data(quick))), str(path))
        if own:
            spark.stop()
    return path
