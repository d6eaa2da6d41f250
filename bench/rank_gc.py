"""A Keras rank's CPU with Python's garbage-collection thresholds and with the ones the plugin sets in a rank.

Contestants, each a fresh process that does what one Keras rank of the Rossmann workflow does: flytekit imported
(a rank's Flyte context), ``hvd.init()`` of horovod.tensorflow (which imports TensorFlow with tf-keras), then the
Rossmann model trained as one Horovod rank (``rossmann.train.train_rank``, the MPI route's body) for 2 epochs on
the same prepared rows (the ``--quick`` synthetic size, 60 stores, whatever the mode):
  * ``Python's default``: thresholds (700, 10, 10), what every rank had before (the baseline)
  * ``the rank's``: ``horovod_flyte_runtime.rank_start.collect_garbage_less_often()`` first, as ``rank_main`` and
    ``start_rank`` call it

Measured: the process's CPU seconds up to the end of ``hvd.init()`` (the imports) and in all, the garbage
collections Python ran and the seconds they took (``gc.callbacks``), the objects the collector tracks at the end
and the peak resident memory. Both epochs' losses must be the same in both contestants.

    .venv/bin/python -m bench.rank_gc [--quick] [--reps N]
"""

from __future__ import annotations

from bench._common import fmt, header, machine, median, parser, prepared_data, process_result, round_robin, save, table

BODY = """
import gc, json, os, resource, sys, tempfile, time
collections = {"count": 0, "seconds": 0.0}
def clock(phase, info, started=[0.0]):
    if phase == "start":
        started[0] = time.process_time()
    else:
        collections["count"] += 1
        collections["seconds"] += time.process_time() - started[0]
gc.callbacks.append(clock)
if os.environ["BENCH_RANK_GC"] == "1":
    from horovod_flyte_runtime.rank_start import collect_garbage_less_often
    collect_garbage_less_often()
import flytekit  # a rank of a flytekit task has it: its Flyte context
import rossmann  # sets TF_USE_LEGACY_KERAS before TensorFlow's import, as the workflow's ranks do
import horovod.tensorflow.keras as hvd
hvd.init()
imported = time.process_time()
import tensorflow as tf
from rossmann.train import train_rank

class Losses(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.losses = []
    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(float(logs["loss"]))

losses = Losses()
train_rank(sys.argv[1], tempfile.mkdtemp(), epochs=2, callbacks=[losses])
usage = resource.getrusage(resource.RUSAGE_SELF)
print("RESULT " + json.dumps({"import_cpu": imported, "cpu": usage.ru_utime + usage.ru_stime,
                              "collections": collections["count"], "gc_seconds": collections["seconds"],
                              "tracked_objects": len(gc.get_objects()), "max_rss_mb": usage.ru_maxrss / 1024,
                              "threshold": gc.get_threshold()[0], "losses": losses.losses}))
"""

CONTESTANTS = {"Python's default": "0", "the rank's": "1"}


def _rank(prepared: str, setting: str, results: list) -> float:
    result = process_result(BODY, prepared, env={"BENCH_RANK_GC": setting})
    results.append(result)
    return result["cpu"]


def main() -> None:
    args = parser(__doc__).parse_args()
    reps = args.reps or (1 if args.quick else 5)
    header("a Keras rank's CPU with Python's garbage-collection thresholds and with the rank's", args.quick)
    info = machine()
    prepared = str(prepared_data(quick=True))
    results = {name: [] for name in CONTESTANTS}
    cpu = round_robin({name: lambda name=name: _rank(prepared, CONTESTANTS[name], results[name])
                       for name in CONTESTANTS}, reps)
    losses = {name: {tuple(r["losses"]) for r in runs} for name, runs in results.items()}
    assert losses["Python's default"] == losses["the rank's"], f"the contestants trained differently: {losses}"

    def med(name: str, key: str) -> float:
        return median([r[key] for r in results[name]])

    rows = [[name, med(name, "threshold"), fmt(med(name, "import_cpu")), fmt(median(cpu[name])),
             fmt(med(name, "collections"), 0), fmt(med(name, "gc_seconds")), fmt(med(name, "tracked_objects"), 0),
             fmt(med(name, "max_rss_mb"), 0)] for name in CONTESTANTS]
    print(table(["contestant", "threshold", "import CPU s", "process CPU s", "collections", "in collections s",
                 "tracked objects at the end", "peak RSS MB"], rows))
    ratio = median(cpu["Python's default"]) / median(cpu["the rank's"])
    import_ratio = med("Python's default", "import_cpu") / med("the rank's", "import_cpu")
    print(f"\nRATIO default / rank's process CPU = {ratio:.2f}x")
    print(f"RATIO default / rank's import CPU = {import_ratio:.2f}x")
    print("losses, the same in both:", sorted(losses["the rank's"]))
    saved = save("rank_gc" + ("-quick" if args.quick else ""),
                 {"quick": args.quick, "reps": reps, "machine": info, "cpu_s": cpu, "runs": results,
                  "ratio_cpu": ratio, "ratio_import_cpu": import_ratio})
    print(f"saved {saved}")


if __name__ == "__main__":
    main()
