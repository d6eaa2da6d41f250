"""Training recipes by accuracy: the default model trained in ONE process as the floor trains (``bench/floor.py``: the
wf's global batch, peak rate, warm-up and half-cosine schedule) on the default prepared rows, once per seed, with the
default settings (their L2 penalty: ``rossmann.hyperparameters.l2_penalty`` of the rows) and with each variant; each
run keeps its best epoch by backtest RMSPE and is scored as the workflow scores (untrained embeddings set to the mean,
calibrated on the training rows): backtest RMSPE, and test RMSPE as a ratio to the perfect model's on the test
period's true sales. The seeds' spread is the point: a recipe is better only where its worst seed beats the default's
average.

    .venv/bin/python -m bench.recipe                       # the default and the L2 variants, seeds 0-4
    .venv/bin/python -m bench.recipe --seeds 3 --variant 'epochs=30' --variant 'l2=5e-5,epochs=30'
    .venv/bin/python -m bench.recipe --prepared DIR --epochs 6 --seeds 2 --variant l2=5e-5   # e.g. at full size
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Dict, List

import numpy as np

from bench._common import header, load_average, machine, parser, save, table
from bench.floor import prepared_rows
from rossmann.synthetic import TEST_TRUTH

VARIANTS = ["l2=5e-5,epochs=30", "l2=5e-5", "l2=5e-4", "l2=5e-3", "epochs=30"]  # the former default first
KNOBS = {"l2": (float, 0.0, "a number >= 0"), "epochs": (int, 1, "a whole number >= 1"),
         "dropout": (float, 0.0, "a number >= 0")}


def parse_variant(text: str) -> Dict[str, float]:
    """'l2=5e-4,epochs=30' as {'l2': 0.0005, 'epochs': 30}; an unknown setting or a bad value is refused, naming the
    setting and what is allowed."""
    changes: Dict[str, float] = {}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        if name not in KNOBS:
            raise SystemExit(f"--variant {text!r}: unknown setting {name!r} (known: {', '.join(KNOBS)})")
        kind, low, allowed = KNOBS[name]
        try:
            number = kind(value)
        except ValueError:
            number = None
        if number is None or not number >= low:
            raise SystemExit(f"--variant {text!r}: {name}={value!r}: must be {allowed}")
        changes[name] = number
    return changes


def train_and_score(prepared: Path, seed: int, l2: float, epochs: int, dropout: float) -> Dict[str, float]:
    """One run: the best epoch by backtest RMSPE, scored as the workflow scores its model."""
    import tensorflow as tf

    import rossmann.model as model_module
    from rossmann.hyperparameters import BATCH_SIZE, HIDDEN, LEARNING_RATE
    from rossmann.metrics import rmspe
    from rossmann.predict import predict_log_sales, predict_submission
    from rossmann.prepared import continuous_stats, feature_cols, load_metadata, model_inputs, read_split
    from rossmann.report import score_test
    from rossmann.schedule import half_cosine
    from workflows.rossmann import RANKS

    metadata = load_metadata(prepared)
    label = metadata["label_col"]
    train, val = (read_split(prepared / part, feature_cols(metadata) + [label]) for part in ("train", "val"))
    x, y = model_inputs(train, metadata), train[label].to_numpy(np.float32)
    true_val = np.exp(val[label].to_numpy(np.float64))
    tf.keras.utils.set_random_seed(seed)
    model = model_module.build_model(metadata, continuous_stats(prepared, metadata), HIDDEN, dropout, l2=l2)
    rate = LEARNING_RATE * RANKS
    optimizer = model_module.make_optimizer(rate)
    model_module.compile_model(model, optimizer)
    best, best_epoch, best_weights = np.inf, 0, None
    for epoch in range(epochs):
        optimizer.learning_rate.assign(rate * half_cosine(epoch, epochs))
        model.fit(x, y, batch_size=BATCH_SIZE * RANKS, epochs=1, shuffle=True, verbose=0)
        score = rmspe(true_val, np.exp(predict_log_sales(model, val, metadata)))
        if score < best:
            best, best_epoch, best_weights = score, epoch + 1, model.get_weights()
    if best_weights is None:
        raise SystemExit(f"seed {seed}: no epoch gave a finite backtest RMSPE (l2={l2}, dropout={dropout})")
    model.set_weights(best_weights)
    model_module.fill_untrained_embeddings(model, metadata)
    model, _ = model_module.calibrate_for_rmspe(model, train, metadata)
    test = score_test(predict_submission(model, prepared / "test", metadata), prepared)
    scores = {"backtest_rmspe": rmspe(true_val, np.exp(predict_log_sales(model, val, metadata))),
              "test_x_perfect": test["test_rmspe"] / test["test_perfect_rmspe"], "best_epoch": best_epoch}
    tf.keras.backend.clear_session()  # after the model's last use: the next run starts afresh, memory stays flat
    return scores


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5, help="runs per recipe, seeds 0 to N-1")
    p.add_argument("--epochs", type=int, default=None,
                   help="the default recipe's epochs (default: the workflow's; e.g. 6 or 8 at full size, section 9)")
    p.add_argument("--prepared", type=Path, default=None,
                   help="a prepared-data directory of synthetic data (the prepare task's output, with test_truth.csv; "
                        "default: the default wf's rows)")
    p.add_argument("--variant", action="append", default=None,
                   help=f"settings that differ from the default, e.g. 'l2=5e-4,epochs=30' ({', '.join(KNOBS)}); "
                        f"repeatable (default: {' '.join(VARIANTS)})")
    opts = p.parse_args()
    if opts.seeds < 1 or (opts.epochs is not None and opts.epochs < 1):
        raise SystemExit(f"--seeds {opts.seeds} --epochs {opts.epochs}: both must be whole numbers >= 1")
    header("Training recipes by test accuracy, one process, several seeds", opts.quick)
    from rossmann.hyperparameters import DROPOUT, EPOCHS, l2_penalty
    from rossmann.prepared import load_metadata

    info, prepared = machine(), opts.prepared or prepared_rows(opts.quick)
    if not (prepared / TEST_TRUTH).exists():
        raise SystemExit(f"{prepared / TEST_TRUTH}: missing; --prepared must be a prepare task's output of synthetic "
                         "data (it carries the test period's true sales)")
    epochs = opts.epochs or (2 if opts.quick else EPOCHS)
    default = {"l2": l2_penalty(load_metadata(prepared)["rows"]["train"]), "epochs": epochs, "dropout": DROPOUT}
    recipes = {"default": default}
    for text in (opts.variant or ([] if opts.quick else VARIANTS)):
        recipes[text] = {**default, **parse_variant(text)}
    seeds = range(1 if opts.quick else opts.seeds)
    load_at_start = load_average()
    runs: Dict[str, List[Dict[str, float]]] = {}
    for name, recipe in recipes.items():
        for seed in seeds:
            runs.setdefault(name, []).append(train_and_score(prepared, seed, **recipe))
            print(f"  {name} seed {seed}: {runs[name][-1]}", flush=True)
    rows = []
    for name, results in runs.items():
        ratios = [r["test_x_perfect"] for r in results]
        rows.append([name, " ".join(f"{r['backtest_rmspe']:.4f}" for r in results),
                     " ".join(f"{x:.3f}" for x in ratios), f"{statistics.mean(ratios):.3f}", f"{max(ratios):.3f}",
                     " ".join(str(r["best_epoch"]) for r in results)])
    print(f"load average at the start: {load_at_start:.2f}")
    print(table(["recipe", "backtest RMSPE by seed", "test x perfect by seed", "mean", "worst", "best epoch"], rows))
    base = statistics.mean(r["test_x_perfect"] for r in runs["default"])
    for name, results in runs.items():
        if name != "default":
            print(f"RATIO test RMSPE {name} / default (mean over seeds): "
                  f"{statistics.mean(r['test_x_perfect'] for r in results) / base:.3f}x")
    save("recipe", {"machine": info, "load_average_at_start": load_at_start, "prepared": str(prepared),
                    "rows": load_metadata(prepared)["rows"], "recipes": recipes, "runs": runs})


if __name__ == "__main__":
    main()
