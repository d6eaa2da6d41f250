"""Data preparation: our Spark preparation vs the reference example's approach, on the same input.

Input: the full-size synthetic data set (1,115 stores, 2013-01-01..2015-07-31 plus 48 test days; about
one million train rows), generated once. Both contestants start from the CSV files (``rossmann.data.load``:
read, type and check them) and write the same train/val/test Parquet + metadata.json on Spark local[2]:
  * ours: ``rossmann.features.prepare`` (window functions for the event counters, one-pass vocabulary,
    a map expression for the encoding);
  * reference: bench/_reference_prep.py (the Horovod example's Python ``mapPartitions`` counters,
    per-column vocabulary jobs and Python UDF lookups, producing our feature definitions).
The outputs are compared value for value (every column of every row of the three splits).

Targets: ours under 3 minutes on 2 cores, and faster than the reference approach.

    .venv/bin/python -m bench.prep [--quick] [--reps N]
"""

from __future__ import annotations

import shutil
import time

from bench import _reference_prep
from bench._common import (
    CACHE,
    fmt,
    header,
    machine,
    median,
    parser,
    prepared_path,
    round_robin,
    save,
    spark_session,
    synthetic_data,
    table,
)


def _run(spark, data_dir, out_dir, prepare, phases):
    from rossmann import data as rdata

    start = time.perf_counter()
    raw = rdata.load(spark, str(data_dir))
    loaded = time.perf_counter()
    try:
        prepare(spark, raw, str(out_dir))
    finally:
        raw.unpersist()
    end = time.perf_counter()
    phases.append((loaded - start, end - loaded))
    return end - start


def compare(ours, theirs) -> dict:
    """Every column of every row of train/val/test, after sorting both by their keys: must be identical."""
    import json

    from rossmann.prepared import read_split

    a_meta, b_meta = (json.loads((p / "metadata.json").read_text()) for p in (ours, theirs))
    if a_meta != b_meta:
        raise AssertionError("metadata.json differs")
    checked = {}
    for split, keys in (("train", ["Date", "Store"]), ("val", ["Date", "Store"]), ("test", ["Id"])):
        a = read_split(ours / split).sort_values(keys).reset_index(drop=True)
        b = read_split(theirs / split)[list(a.columns)].sort_values(keys).reset_index(drop=True)
        if len(a) != len(b):
            raise AssertionError(f"{split}: {len(a)} rows vs {len(b)}")
        diff = [c for c in a.columns if not a[c].equals(b[c].astype(a[c].dtype))]
        if diff:
            raise AssertionError(f"{split}: columns differ: {diff}")
        checked[split] = {"rows": len(a), "columns": len(a.columns)}
    return checked


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    reps = args.reps or (1 if args.quick else 2)
    header("data preparation: ours vs the reference example's approach", args.quick)
    info = machine()
    from rossmann import features

    data_dir = synthetic_data(args.quick)
    out = CACHE / "prep-runs"
    ours_dir, ref_dir = out / "ours", out / "reference"
    spark = spark_session()
    if not args.quick:  # warm the JVM (class loading, code generation) for both alike, on the small data
        print("warm-up on the small data set (not counted)", flush=True)
        small = synthetic_data(True)
        _run(spark, small, ours_dir, features.prepare, [])
        _run(spark, small, ref_dir, _reference_prep.prepare, [])
    phases = {"ours": [], "reference": []}
    samples = round_robin({
        "ours": lambda: _run(spark, data_dir, ours_dir, features.prepare, phases["ours"]),
        "reference": lambda: _run(spark, data_dir, ref_dir, _reference_prep.prepare, phases["reference"]),
    }, reps)
    checked = compare(ours_dir, ref_dir)
    train_rows = sum(1 for _ in open(data_dir / "train.csv")) - 1
    spark.stop()
    if not (prepared_path(args.quick) / "metadata.json").exists():  # bench/predict.py and train_scale.py use it
        prepared_path(args.quick).parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(prepared_path(args.quick), ignore_errors=True)
        shutil.move(str(ours_dir), str(prepared_path(args.quick)))
    shutil.rmtree(out, ignore_errors=True)

    o, r = median(samples["ours"]), median(samples["reference"])
    rows = []
    for name, label in (("ours", "rossmann.features.prepare (ours)"), ("reference", "reference approach")):
        load = median([p[0] for p in phases[name]])
        prep = median([p[1] for p in phases[name]])
        rows.append([label, fmt(median(samples[name]), 1), fmt(load, 1), fmt(prep, 1),
                     " ".join(fmt(x, 1) for x in samples[name]), fmt(r / median(samples[name])) + "x"])
    print(f"\nPreparation of {train_rows:,} train rows + the test rows (seconds, median of {reps}; load = read, "
          "type and check the CSVs; speed-up = reference's total / this one's)")
    print(table(["preparation", "total s", "load s", "prepare s", "all repetitions (total s)", "speed-up"], rows))
    print("outputs identical: " + ", ".join(f"{s} {v['rows']:,} rows x {v['columns']} columns"
                                            for s, v in checked.items()))
    print(f"RATIO reference / ours = {r / o:.2f}x faster (target > 1x: {'met' if r > o else 'MISSED'}); "
          f"ours {o:.1f} s (target < 180 s: {'met' if o < 180 else 'MISSED'})")
    path = save("prep", {"quick": args.quick, "reps": reps, "train_rows": train_rows, "machine": info,
                         "samples": samples, "phases": phases, "identical": checked,
                         "ratio": r / o})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
