"""The floor: the default workflow's model and loss on the same prepared rows, trained in ONE process from in-memory
arrays (no Spark, no petastorm, no Horovod; TensorFlow's threads on every core) until its backtest RMSPE reaches the
one the default ``wf`` reaches (within ``--tolerance``, 1%: the wf's own backtest RMSPE
varied from 0.1034 to 0.1052 over five runs on the same data); against the default ``wf``'s train task in the
same script.

Both sides are scored alike (``rossmann.train._finish``'s way): untrained embeddings set to the mean, the output
calibrated for RMSPE on the training rows, RMSPE over the whole backtest split. The floor checks that after every
epoch; its time to accuracy counts its epochs and those checks (loading the Parquet and building the model are
listed apart). The workflow's train task time is its own ``[train] done in N s`` line.

    .venv/bin/python -m bench.floor                   # the default wf, then the floor on its prepared rows
    .venv/bin/python -m bench.floor --batch-size 512  # another batch (its learning rate scales with it)

The floor trains as the wf's ranks do together: the wf's global batch (per-rank batch x ranks), its global peak rate
(per-rank rate x ranks), its warm-up and half-cosine schedule over the same epochs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict

import numpy as np

from bench._common import CACHE, ROOT, header, load_average, machine, parser, save, spark_session
from bench.full_size import run_wf

DEFAULT_DATA = dict(n_stores=50, start="2013-01-01", end="2015-07-31", seed=0)  # what ``wf`` generates
QUICK_DATA = dict(n_stores=8, start="2014-06-01", end="2015-07-31", seed=0)


def prepared_rows(quick: bool) -> Path:
    """The prepared rows of the workflow's (default or --quick) synthetic data, made as its tasks make them (the test
    period's true sales carried along), cached."""
    from rossmann import data as rdata
    from rossmann import features, report, synthetic

    name = "floor-quick" if quick else "floor-default"
    raw, prepared = CACHE / "data" / f"{name}-csv", CACHE / "data" / f"{name}-prepared"
    if not (prepared / "metadata.json").exists():
        synthetic.generate(str(raw), **(QUICK_DATA if quick else DEFAULT_DATA))
        spark = spark_session()
        features.prepare(spark, rdata.load(spark, str(raw)), str(prepared), min_row_groups=8)
        spark.stop()
    report.carry_synthetic_files(raw, prepared)
    return prepared


def backtest_rmspe(model, metadata, x_train, y_train, x_val, y_val) -> float:
    """The workflow's backtest score of a model: untrained embeddings set to the mean, sales scaled by the RMSPE
    optimum on the training rows (``rossmann.model.calibrate_for_rmspe``'s factor), RMSPE over all of the backtest."""
    from rossmann.metrics import rmspe, rmspe_scale
    from rossmann.model import fill_untrained_embeddings

    fill_untrained_embeddings(model, metadata)  # rows no training row reaches: no gradient ever changes them
    scale = rmspe_scale(model.predict(x_train, batch_size=16384, verbose=0), y_train)
    return rmspe(np.exp(y_val.astype(np.float64)), scale * np.exp(model.predict(x_val, batch_size=16384, verbose=0)))


def floor(prepared: Path, target: float, batch_size: int, learning_rate: float, epochs: int, seed: int = 0) -> Dict:
    """Train until the backtest RMSPE is <= target (at most `epochs`, the half-cosine schedule's length)."""
    import tensorflow as tf

    from rossmann.hyperparameters import DROPOUT, HIDDEN
    from rossmann.model import build_model, compile_model, make_optimizer
    from rossmann.prepared import continuous_stats, feature_cols, load_metadata, model_inputs, read_split
    from rossmann.schedule import half_cosine

    started = time.perf_counter()
    metadata = load_metadata(prepared)
    cols = feature_cols(metadata) + [metadata["label_col"]]
    train, val = read_split(prepared / "train", cols), read_split(prepared / "val", cols)
    x, y = model_inputs(train, metadata), train[metadata["label_col"]].to_numpy(np.float32)
    x_val, y_val = model_inputs(val, metadata), val[metadata["label_col"]].to_numpy(np.float32)
    tf.keras.utils.set_random_seed(seed)
    model = build_model(metadata, continuous_stats(prepared, metadata), HIDDEN, DROPOUT)
    optimizer = make_optimizer(learning_rate)
    compile_model(model, optimizer)
    setup = time.perf_counter() - started
    fit_s, check_s, scores = 0.0, 0.0, []
    for epoch in range(epochs):
        optimizer.learning_rate.assign(learning_rate * half_cosine(epoch, epochs))  # the wf's schedule, warm-up too
        t0 = time.perf_counter()
        model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=True, verbose=0)
        t1 = time.perf_counter()
        scores.append(backtest_rmspe(model, metadata, x, y, x_val, y_val))
        fit_s, check_s = fit_s + t1 - t0, check_s + time.perf_counter() - t1
        print(f"  floor epoch {epoch + 1}: backtest RMSPE {scores[-1]:.4f}, {t1 - t0:.2f} s "
              f"(+{time.perf_counter() - t1:.2f} s check)", flush=True)
        if scores[-1] <= target:
            break
    reached = scores[-1] <= target
    return {"batch_size": batch_size, "learning_rate": learning_rate, "schedule_epochs": epochs, "reached": reached,
            "epochs": len(scores), "scores": [round(s, 5) for s in scores], "setup_s": round(setup, 2),
            "fit_s": round(fit_s, 2), "check_s": round(check_s, 2), "to_accuracy_s": round(fit_s + check_s, 2),
            "train_rows": len(train)}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=None,
                   help="the floor's batch size (default: the workflow's global batch, its per-rank batch x ranks)")
    p.add_argument("--learning-rate", type=float, default=None,
                   help="the floor's peak learning rate (default: the workflow's per-rank rate x ranks x the batch's "
                        "share of the global batch)")
    p.add_argument("--epochs", type=int, default=None, help="length of the floor's half-cosine schedule, its cap")
    p.add_argument("--tolerance", type=float, default=0.01,
                   help="relative: the floor's target is the wf's backtest RMSPE x (1 + tolerance)")
    opts = p.parse_args()
    header("Floor: one process from in-memory arrays vs the default wf's train task", opts.quick)
    from rossmann.hyperparameters import BATCH_SIZE, EPOCHS, LEARNING_RATE
    from workflows.rossmann import RANKS

    info = machine()
    hp = {"n_stores": QUICK_DATA["n_stores"], "start": QUICK_DATA["start"], "epochs": 2} if opts.quick else {}
    logs = CACHE
    logs.mkdir(parents=True, exist_ok=True)
    wf = run_wf(hp, logs / "floor_wf.log")
    if "backtest_rmspe" not in wf or "train" not in wf["tasks_s"]:
        raise SystemExit(f"the wf run printed no train time or backtest score; see {logs / 'floor_wf.log'}")
    prepared = prepared_rows(opts.quick)
    load_at_floor = round(load_average(), 2)
    batch = opts.batch_size or BATCH_SIZE * RANKS
    lr = opts.learning_rate or LEARNING_RATE * RANKS * batch / (BATCH_SIZE * RANKS)
    target = wf["backtest_rmspe"] * (1 + opts.tolerance)
    result = floor(prepared, target, batch, lr, opts.epochs or hp.get("epochs", EPOCHS))
    print(f"wf: train task {wf['tasks_s']['train']:.1f} s, wall {wf['wall_s']:.1f} s, backtest RMSPE "
          f"{wf['backtest_rmspe']:.4f}; floor: {'reached' if result['reached'] else 'DID NOT reach'} {target:.4f} in "
          f"{result['epochs']} epochs, {result['to_accuracy_s']:.1f} s ({result['fit_s']:.1f} s fitting, "
          f"{result['check_s']:.1f} s checks; {result['setup_s']:.1f} s loading and building before)", flush=True)
    if not result["reached"]:
        print(f"the floor did not reach {target:.4f} in {result['epochs']} epochs: no ratio (try --epochs)")
    train = wf["tasks_s"]["train"]
    print(f"RATIO wf train task / floor{'' if result['reached'] else ' (NOT REACHED, its whole schedule)'}: "
          f"{train / result['to_accuracy_s']:.2f}x (/ floor's fitting alone: {train / result['fit_s']:.2f}x)")
    save("floor", {"machine": info, "load_average_at_floor": load_at_floor, "wf": wf, "target_backtest_rmspe": target,
                   "floor": result,
                   "prepared": str(prepared.relative_to(ROOT))})


if __name__ == "__main__":
    main()
