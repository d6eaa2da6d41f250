"""Where a training step's time goes: the default model at the wf's per-rank batch on the default prepared rows,
built up one part at a time, each in its own Horovod job (``horovod.runner.run``, Gloo) on this machine:

1. compute: ONE rank, one thread (as the Estimator pins each CPU rank), Keras on NumPy arrays;
2. + collectives: 2 ranks, the same, with ``hvd.DistributedOptimizer`` (the dense allreduce and the embeddings'
   sparse allgathers every step);
3. + the wf's input pipeline: 2 ranks on ``rossmann.batches.shuffled_batches`` (what both Keras routes train on);
4. the former input pipeline: 2 ranks on ``from_tensor_slices(...).shuffle().batch()`` (element-wise), for scale;
5. run 3 again under Horovod's timeline: the share of rank 0's step time inside the collectives' negotiation and
   execution, and the collectives per step.

Milliseconds per step are the median over the epochs after the first (which traces the graph).

    .venv/bin/python -m bench.steps
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from bench._common import header, machine, parser, save, table
from bench.floor import prepared_rows


def rank_job(prepared: str, batch: int, inputs: str, epochs: int) -> Dict:
    """One rank: its share of the train split, the default model, ``epochs`` epochs; seconds per epoch."""
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)  # as horovod.spark.keras pins a CPU rank
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import horovod.tensorflow.keras as hvd

    from rossmann.batches import shuffled_batches
    from rossmann.hyperparameters import DROPOUT, HIDDEN
    from rossmann.model import build_model, compile_model, make_optimizer
    from rossmann.prepared import continuous_stats, feature_cols, load_metadata, model_inputs, read_split

    hvd.init()
    path = Path(prepared)
    metadata = load_metadata(path)
    train = read_split(path / "train", feature_cols(metadata) + [metadata["label_col"]], shard=(hvd.rank(), hvd.size()))
    steps = len(train) // batch
    train = train.iloc[: steps * batch]
    x, y = model_inputs(train, metadata), train[metadata["label_col"]].to_numpy(np.float32)
    tf.keras.utils.set_random_seed(0)
    model = build_model(metadata, continuous_stats(path, metadata), HIDDEN, DROPOUT)
    optimizer = make_optimizer(1e-3)
    compile_model(model, hvd.DistributedOptimizer(optimizer) if hvd.size() > 1 else optimizer)
    seconds: List[float] = []

    class EpochTimes(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            seconds.append(time.perf_counter() - self.started)

    callbacks = [EpochTimes(), *([hvd.callbacks.BroadcastGlobalVariablesCallback(0)] if hvd.size() > 1 else [])]
    if inputs == "numpy":
        model.fit(x, y, batch_size=batch, shuffle=True, epochs=epochs, verbose=0, callbacks=callbacks)
    else:
        data = (shuffled_batches(x, y, batch, seed=hvd.rank()) if inputs == "shuffled_batches" else
                tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y)).repeat().batch(batch).prefetch(1))
        model.fit(data, steps_per_epoch=steps, epochs=epochs, verbose=0, callbacks=callbacks)
    return {"steps": steps, "epoch_s": seconds}


def job(prepared: Path, batch: int, ranks: int, inputs: str, epochs: int, timeline: str = "") -> Dict:
    from horovod.runner import run

    if timeline:
        os.environ["HOROVOD_TIMELINE"] = timeline
    try:
        result = run(rank_job, args=(str(prepared), batch, inputs, epochs), np=ranks, use_gloo=True)[0]
    finally:
        os.environ.pop("HOROVOD_TIMELINE", None)
    result["ms_per_step"] = 1000 * statistics.median(result["epoch_s"][1:]) / result["steps"]
    return result


def collectives(path: str) -> Dict:
    """From a Horovod timeline: collectives started per rank-0 step's worth, and the seconds of the run covered by
    any collective's negotiation or execution (union of the intervals) and by execution alone."""
    text = Path(path).read_text().rstrip().rstrip(",")
    events = json.loads(text if text.endswith("]") else text + "]")
    open_spans: Dict[int, List[Dict]] = {}
    spans: Dict[str, List[tuple]] = {"negotiate": [], "execute": []}
    counts = {"allgather": 0, "allreduce": 0}
    for e in events:
        if e.get("ph") == "B":
            open_spans.setdefault(e["pid"], []).append(e)
        elif e.get("ph") == "E" and open_spans.get(e["pid"]):
            begin = open_spans[e["pid"]].pop()
            name = begin["name"]
            if name in ("ALLGATHER", "ALLREDUCE"):
                spans["execute"].append((begin["ts"], e["ts"]))
                counts[name.lower()] += 1
            elif name in ("NEGOTIATE_ALLGATHER", "NEGOTIATE_ALLREDUCE"):
                spans["negotiate"].append((begin["ts"], e["ts"]))

    def covered(intervals: List[tuple]) -> float:
        total, end = 0.0, None
        for a, b in sorted(intervals):
            if end is None or a > end:
                total, end = total + (b - a), b
            elif b > end:
                total, end = total + (b - end), b
        return total / 1e6

    return {"counts": counts, "execute_s": covered(spans["execute"]),
            "negotiate_or_execute_s": covered(spans["execute"] + spans["negotiate"])}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=6)
    opts = p.parse_args()
    header("Where a training step's time goes", opts.quick)
    from rossmann.hyperparameters import BATCH_SIZE

    info, prepared = machine(), prepared_rows(opts.quick)
    epochs = 3 if opts.quick else opts.epochs
    runs = {
        "1 rank, 1 thread, NumPy arrays (compute)": job(prepared, BATCH_SIZE, 1, "numpy", epochs),
        "2 ranks, NumPy arrays (+ collectives)": job(prepared, BATCH_SIZE, 2, "numpy", epochs),
        "2 ranks, shuffled_batches (+ the wf's input pipeline)": job(prepared, BATCH_SIZE, 2, "shuffled_batches",
                                                                     epochs),
        "2 ranks, element-wise shuffle().batch() (the former one)": job(prepared, BATCH_SIZE, 2, "elementwise",
                                                                         epochs),
    }
    with tempfile.TemporaryDirectory() as scratch:
        timeline = os.path.join(scratch, "timeline.json")
        traced = job(prepared, BATCH_SIZE, 2, "shuffled_batches", epochs, timeline)
        spent = collectives(timeline)
    steps_traced = traced["steps"] * (len(traced["epoch_s"]) - 1)
    trained_s = sum(traced["epoch_s"][1:])
    print(table(["run", "ms per step", "steps per epoch", "epochs (s)"],
                [[name, f"{r['ms_per_step']:.1f}", r["steps"], " ".join(f"{s:.2f}" for s in r["epoch_s"])]
                 for name, r in runs.items()]))
    per_step = {k: v / traced["steps"] / len(traced["epoch_s"]) for k, v in spent["counts"].items()}
    print(f"timeline (2 ranks, shuffled_batches, {traced['ms_per_step']:.1f} ms per step): per step "
          f"{per_step['allgather']:.0f} allgathers and {per_step['allreduce']:.0f} allreduces; in the whole run "
          f"{spent['negotiate_or_execute_s']:.1f} s inside a collective's negotiation or execution, "
          f"{spent['execute_s']:.1f} s executing, against {trained_s:.1f} s for the {steps_traced} steps after the "
          f"first epoch plus the first epoch's {traced['epoch_s'][0]:.1f} s")
    one, two = runs["1 rank, 1 thread, NumPy arrays (compute)"], runs["2 ranks, NumPy arrays (+ collectives)"]
    print(f"RATIO 2 ranks / 1 rank, ms per step at the same per-rank batch: {two['ms_per_step'] / one['ms_per_step']:.2f}x "
          f"(samples per second: {2 * one['ms_per_step'] / two['ms_per_step']:.2f}x of 1 rank's)")
    save("steps", {"machine": info, "batch_per_rank": BATCH_SIZE, "runs": runs, "timeline": spent,
                   "timeline_run": traced})


if __name__ == "__main__":
    main()
