"""Horovod's own reference example against our workflow, on the same synthetic Rossmann data: time to accuracy.

The reference is ``examples/spark/keras/keras_spark_rossmann_estimator.py`` of horovod v0.28.1, vendored as
``bench/_reference_example.py`` (its header lists the patches: only what Spark 3.5 and Keras 2.15 need). It runs as its issue
ran it: ``--num-proc 2`` on Spark ``local[2]``, ``--epochs 10``. Ours is ``pyflyte run workflows/rossmann.py wf
--data_dir <dir>`` with its default hyperparameters. Both read the same generated CSV files; each run's
``submission.csv`` is scored here by one function (``score``: RMSPE on the test period's rows with true sales > 0,
and the perfect model's on the same rows, from the generator's ``test_truth.csv``, which neither run reads).

One data adaptation for the reference (not for ours): the example joins googletrend.csv on (calendar year, ISO
week) of the day and of the week's Sunday, so a day needs the row of the Sunday that ends its ISO week (and a
29-31 December in ISO week 1 the row of that January's first Sunday). The generator's googletrend.csv covers
exactly the data's weeks, so the example's inner join drops the last test days (and, for data starting after early
January, 29-31 December) and it stops on its ``lost rows in joins`` assert. The reference therefore reads a copy
of the data whose googletrend.csv has the missing (year, ISO week) rows added, each with the trend of the week its
days fall in; every other file is the same file. Ours reads the generated files unchanged (it joins a day to the
week starting on the Sunday on or before it, so it would never match the added rows anyway).

    .venv/bin/python -m bench.reference               # both data sets: reference 10 epochs, ours its defaults
    .venv/bin/python -m bench.reference --quick       # 8 stores, about 14 months, 1 epoch each: a sanity run
    .venv/bin/python -m bench.reference --epochs 20   # the reference's epochs
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from pathlib import Path
from typing import Dict, List, Tuple

from bench._common import CACHE, PYTHON, ROOT, fmt, header, load_average, machine, parser, save, table
from bench.full_size import measured, run_wf

EXAMPLE = ROOT / "bench" / "_reference_example.py"
EXAMPLE_SOURCE = "horovod/horovod v0.28.1 (1d217b5), examples/spark/keras/keras_spark_rossmann_estimator.py"
RANKS = 2
OTHER_SHAPE = dict(n_stores=150, seed=7, start="2013-03-01", end="2015-04-30")
QUICK = dict(n_stores=8, seed=0, start="2014-06-01", end="2015-07-31")  # over a year: the example validates on
QUICK_EPOCHS = 1                                                          # the test period a year earlier
BEST = re.compile(r"Best RMSPE: ([\d.]+)")
ADDED = "googletrend_rows_added.json"  # in the example's copy of the data: what for_example added


def workflow_defaults() -> Dict:
    """The workflow's Hyperparameters defaults (what ``pyflyte run workflows/rossmann.py wf`` uses)."""
    saved = dict(os.environ)
    try:
        from workflows.rossmann import Hyperparameters  # sets warning filters in os.environ: not for the example
    finally:
        os.environ.clear()
        os.environ.update(saved)
    hp = Hyperparameters()
    return {"epochs": hp.epochs, "n_stores": hp.n_stores, "seed": hp.seed, "start": hp.start, "end": hp.end}


def data_sets(quick: bool, defaults: Dict) -> Dict[str, Dict]:
    if quick:
        return {"quick": QUICK}
    default = {k: defaults[k] for k in ("n_stores", "seed", "start", "end")}
    return {"default": default, "other-shape": OTHER_SHAPE}


def describe(shape: Dict) -> str:
    return f"{shape['n_stores']} stores, {shape['start']}..{shape['end']}, seed {shape['seed']}"


def generated(name: str, shape: Dict) -> Path:
    """The generator's files for ``shape`` (as the workflow's get_data writes them, report included), cached."""
    from rossmann import report as rreport
    from rossmann import synthetic

    path = CACHE / "data" / f"reference-{name}-{shape['n_stores']}-{shape['start']}-{shape['end']}-{shape['seed']}"
    if not (path / synthetic.TEST_TRUTH).exists():
        print(f"generating {describe(shape)} -> {path}", flush=True)
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        report = synthetic.generate(str(tmp), **shape)
        rreport.save_synthetic_report(report, tmp)
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
    return path


def _iso_key(day: dt.date) -> tuple:
    return day.year, day.isocalendar()[1]


def for_example(data: Path) -> Tuple[Path, List[str]]:
    """A copy of ``data`` for the reference example: the same files (linked), googletrend.csv with the rows its
    (year, ISO week) join needs and the generator does not write (see the module docstring); and what was added."""
    import pandas as pd

    out = data.with_name(data.name + "-for-example")
    if (out / ADDED).exists():
        return out, json.loads((out / ADDED).read_text())
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in data.iterdir():
        if f.name != "googletrend.csv":
            os.link(f, tmp / f.name)
    trend = pd.read_csv(data / "googletrend.csv")
    starts = pd.to_datetime(trend["week"].str[:10]).dt.date
    have = {_iso_key(d) for d in starts}
    days = sorted({d for name in ("train.csv", "test.csv")
                   for d in pd.to_datetime(pd.read_csv(data / name, usecols=["Date"])["Date"]).dt.date})
    added = []
    for day in days:
        key = _iso_key(day)
        if key in have:
            continue
        sunday = dt.date.fromisocalendar(key[0], key[1], 7)
        if _iso_key(sunday) != key:
            raise ValueError(f"no Sunday matches {day}'s (year, ISO week) {key} in the example's join")
        own_week = day - dt.timedelta(days=(day.weekday() + 1) % 7)  # the Sunday on or before the day
        rows = trend[starts == own_week].copy()
        rows["week"] = f"{sunday:%Y-%m-%d} - {sunday + dt.timedelta(days=6):%Y-%m-%d}"
        note = f"week {sunday} (for {day}: the trend of the week of {own_week})"
        added.append((note, rows))
        have.add(key)
        print(f"  googletrend.csv for the example: + {note}", flush=True)
    pd.concat([trend, *[rows for _, rows in added]]).to_csv(tmp / "googletrend.csv", index=False)
    notes = [note for note, _ in added]
    (tmp / ADDED).write_text(json.dumps(notes, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out, notes


def score(submission_csv: Path, data: Path) -> Dict:
    """RMSPE of a submission (Id and one prediction column) on the test rows with true Sales > 0, and the perfect
    model's on the same rows: the workflow's own scoring (``rossmann.report.score_test``), for both contestants."""
    import pandas as pd

    from rossmann.report import score_test

    submission = pd.read_csv(submission_csv)
    if submission.shape[1] != 2 or submission.columns[0] != "Id":
        raise ValueError(f"{submission_csv}: expected columns Id and a prediction, got {list(submission.columns)}")
    submission = submission.set_axis(["Id", "Sales"], axis=1)
    if submission["Id"].duplicated().any():
        raise ValueError(f"{submission_csv}: duplicate Ids")
    scores = score_test(submission, data)  # data holds the generator's test_truth.csv
    return {"test_rmspe": round(scores["test_rmspe"], 5), "test_perfect_rmspe": round(scores["test_perfect_rmspe"], 5),
            "test_rows_scored": scores["test_rows_scored"], "submission_rows": len(submission)}


def run_reference(name: str, data: Path, epochs: int) -> Dict:
    """The vendored example as its issue ran it: 2 processes on Spark local[2]; scored from its submission.csv."""
    work = CACHE / "reference-work" / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    example_data, added = for_example(data)
    args = [PYTHON, str(EXAMPLE), "--master", f"local[{RANKS}]", "--num-proc", str(RANKS), "--epochs", str(epochs),
            "--data-dir", f"file://{example_data}", "--work-dir", str(work / "store"),
            "--local-submission-csv", str(work / "submission.csv"),
            "--local-checkpoint-file", str(work / "checkpoint")]
    print(f"[{name}] reference: {EXAMPLE.name} --epochs {epochs} --num-proc {RANKS}", flush=True)
    ran = measured(args, CACHE / f"reference_{name}_example.log", cwd=work)
    best = BEST.search(ran.pop("output"))
    result = {"epochs": epochs, **ran, **score(work / "submission.csv", data),
              "best_validation_rmspe": float(best.group(1)) if best else None, "googletrend_rows_added": added}
    print(f"[{name}] reference: {result}", flush=True)
    return result


def run_ours(name: str, data: Path, hp: Dict, epochs: int) -> Dict:
    """``pyflyte run workflows/rossmann.py wf --data_dir <data>``; scored here from its submission.csv."""
    print(f"[{name}] ours: pyflyte run workflows/rossmann.py wf --data_dir <data> --hp {json.dumps(hp)}", flush=True)
    ran = run_wf(hp, CACHE / f"reference_{name}_ours.log", data)
    if "predictions" not in ran:
        raise SystemExit(f"no Outputs(...) line in the pyflyte output; see {CACHE / f'reference_{name}_ours.log'}")
    scored = score(Path(ran["predictions"]) / "submission.csv", data)
    if "test_rmspe" in ran and abs(ran["test_rmspe"] - scored["test_rmspe"]) > 1e-4:
        raise SystemExit(f"the workflow printed test RMSPE {ran['test_rmspe']}, scored here {scored['test_rmspe']}: "
                         f"not the same submission or not the same scoring")
    result = {"epochs": epochs, **ran, **scored}
    print(f"[{name}] ours: {result}", flush=True)
    return result


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=None,
                   help=f"the reference example's epochs (default 10; {QUICK_EPOCHS} with --quick)")
    opts = p.parse_args()
    if opts.reps not in (None, 1):
        p.error("--reps: this benchmark runs each contestant once (a full run takes about half an hour)")
    header("Horovod's reference Rossmann example vs our workflow", opts.quick)
    load_start = load_average()
    info = machine()
    defaults = workflow_defaults()
    ref_epochs = opts.epochs or (QUICK_EPOCHS if opts.quick else 10)
    hp = {"epochs": QUICK_EPOCHS} if opts.quick else {}
    our_epochs = hp.get("epochs", defaults["epochs"])
    results: Dict[str, Dict] = {}
    rows = []
    for name, shape in data_sets(opts.quick, defaults).items():
        data = generated(name, shape)
        reference = run_reference(name, data, ref_epochs)
        ours = run_ours(name, data, hp, our_epochs)
        results[name] = {"shape": shape, "data_dir": str(data), "reference": reference, "ours": ours,
                         "wall_ratio": round(reference["wall_s"] / ours["wall_s"], 3),
                         "rmspe_ratio": round(reference["test_rmspe"] / ours["test_rmspe"], 3)}
        for label, r in (("reference example", reference), ("ours (wf)", ours)):
            rows.append([f"{name}: {describe(shape)}", label, r["epochs"], fmt(r["wall_s"], 1),
                         f"{r['test_rmspe']:.4f}", f"{r['test_perfect_rmspe']:.4f}",
                         f"{r['test_rmspe'] / r['test_perfect_rmspe']:.2f}x"])
    load_end = load_average()
    print()
    print(table(["data set", "contestant", "epochs", "wall s", "test RMSPE", "perfect", "ratio to perfect"], rows))
    print()
    for name, r in results.items():
        print(f"RATIO reference/ours wall time: {r['wall_ratio']:.2f}x ({name})")
    for name, r in results.items():
        print(f"RATIO reference/ours test RMSPE: {r['rmspe_ratio']:.2f}x ({name})")
    print(f"load average {load_start:.2f} at the start, {load_end:.2f} at the end", flush=True)
    save("reference", {"quick": opts.quick, "example": EXAMPLE_SOURCE, "ranks": RANKS, "machine": info,
                       "load_average_start": round(load_start, 2), "load_average_end": round(load_end, 2),
                       "data_sets": results})


if __name__ == "__main__":
    main()
