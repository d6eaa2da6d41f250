"""Where the default ``wf``'s seconds go: the workflow run as ``pyflyte run`` runs it (local execution, in one Python
process), with a timer around each phase's function, and the ranks' per-epoch lines.

The timers wrap the functions the tasks call (nothing else changes): the SparkSession's start, each prepare stage,
the Estimator's materialisation of the DataFrame to Parquet (``horovod.spark.common.util.prepare_data``), the
Estimator's training call (model shipping, rank start, epochs, the model's return), the train task's last steps
(reading the splits, calibration, backtest scoring, saving the model, scoring the test period and the Deck) and the
predict task. The epochs are the ranks' own ``epoch N/M ... s`` lines; rank start and the model's return are the
training call less the epochs. Each phase's seconds are summed over its calls.

    .venv/bin/python -m bench.phases                       # the default wf
    .venv/bin/python -m bench.phases --hp '{"epochs": 2}'  # any wf settings
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import re
import subprocess
import time
from collections import defaultdict
from typing import Any, Dict

from bench._common import CACHE, PYTHON, ROOT, fmt, header, load_average, machine, parser, save, table

PHASE = re.compile(r"^PHASE (.+?) ([\d.]+)$", re.M)
EPOCH = re.compile(r"epoch (\d+)/\d+: .* ([\d.]+) s$", re.M)
TASK = re.compile(r"\[(\w+)\] done in ([\d.]+) s")


def _wrap(owner: Any, name: str, phase: str, spent: Dict[str, float], context: bool = False) -> None:
    """Replace owner.name by a version that adds its seconds (a context manager's: its entry) to spent[phase]."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        started = time.perf_counter()
        if context:
            return _timed_entry(original(*args, **kwargs), phase, spent, started)
        try:
            return original(*args, **kwargs)
        finally:
            spent[phase] += time.perf_counter() - started

    setattr(owner, name, timed)


@contextlib.contextmanager
def _timed_entry(manager: Any, phase: str, spent: Dict[str, float], started: float):
    with manager as value:
        spent[phase] += time.perf_counter() - started
        yield value


def inner(hp: str) -> None:
    """Run the wf in this process with the timers, then print one PHASE line per phase."""
    import pyspark.sql
    from horovod.spark.common import util
    from horovod.spark.keras.estimator import KerasEstimator

    import rossmann.data
    import rossmann.features
    import rossmann.predict
    import rossmann.train
    from workflows import rossmann as flow

    spent: Dict[str, float] = defaultdict(float)
    for owner, name, phase, context in [
        (pyspark.sql.SparkSession.Builder, "getOrCreate", "Spark session start", False),
        (rossmann.data, "load", "prepare: load and validate the CSV files", False),
        (rossmann.features, "build_vocabs", "prepare: vocabularies", False),
        (rossmann.features, "_write", "prepare: encode and write Parquet", False),
        (util, "prepare_data", "train: Estimator materialises the DataFrame", True),
        (KerasEstimator, "_fit_on_prepared_data", "train: Estimator training call", False),
        (rossmann.train, "read_split", "train: read splits for calibration", False),
        (rossmann.train, "calibrate_for_rmspe", "train: calibration", False),
        (rossmann.train, "predict_log_sales", "train: backtest scoring", False),
        (rossmann.train, "save_training_outputs", "train: save the model", False),
        (flow, "_report_training", "train: test scores and Deck", False),
    ]:
        _wrap(owner, name, phase, spent, context)
    hyper = flow.Hyperparameters.from_json(hp)
    started = time.perf_counter()
    flow.wf(hp=hyper)
    spent["workflow (in process)"] = time.perf_counter() - started
    for phase, seconds in spent.items():
        print(f"PHASE {phase} {seconds:.2f}", flush=True)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--hp", default="{}", help="the wf's hp, as JSON")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.inner:
        return inner(opts.hp)
    hp = json.dumps({"epochs": 2, "n_stores": 8, "start": "2014-06-01"}) if opts.quick else opts.hp
    header("Where the default wf's seconds go", opts.quick)
    info = machine()
    started = time.perf_counter()
    out = subprocess.run([PYTHON, "-m", "bench.phases", "--inner", "--hp", hp], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=1800)
    wall = time.perf_counter() - started
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "phases.log").write_text(out.stdout)
    if out.returncode != 0:
        raise SystemExit(f"the wf failed ({out.returncode}); see {CACHE / 'phases.log'}:\n{out.stdout[-3000:]}")
    phases = {name: float(s) for name, s in PHASE.findall(out.stdout)}
    tasks = {name: float(s) for name, s in TASK.findall(out.stdout)}
    epochs = [float(s) for _, s in EPOCH.findall(out.stdout)]
    phases["train: epochs (ranks' lines)"] = sum(epochs)
    phases["train: rank start and model return (training call less epochs)"] = (
        phases["train: Estimator training call"] - sum(epochs))
    rows = [[name, fmt(seconds, 1)] for name, seconds in phases.items()]
    rows += [[f"task {name} (its own line)", fmt(seconds, 1)] for name, seconds in tasks.items()]
    rows.append(["whole command (python start to exit)", fmt(wall, 1)])
    print(table(["phase", "s"], rows))
    print(f"epochs: {len(epochs)}, first {epochs[0] if epochs else 0:.1f} s, the others "
          f"{sum(epochs[1:]) / max(1, len(epochs) - 1):.2f} s on average")
    save("phases", {"machine": info, "hp": hp, "wall_s": wall, "phases_s": phases, "tasks_s": tasks,
                    "epochs_s": epochs, "load_average_at_end": round(load_average(), 2)})


if __name__ == "__main__":
    main()
