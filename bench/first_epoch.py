"""A Horovod Keras fit's first epoch with and without AutoGraph in Horovod's subgraphs (patch 0016).

Contestants, each a fresh process that trains the Rossmann model as one Horovod rank (``rossmann.train.train_rank``,
the MPI route's body: ``hvd.DistributedOptimizer`` and ``BroadcastGlobalVariablesCallback``) for 2 epochs on the
same prepared rows (the ``--quick`` synthetic size, 60 stores, whatever the mode: a trace's cost does not grow with
the rows):
  * ``autograph``: Horovod's own ``_make_subgraph`` (``tf.function(f)``), put back in the process before the fit
    (the baseline: Horovod 0.28.1 as released)
  * ``no autograph``: the plugin's build as it is (``tf.function(f, autograph=False)``)

Measured: the first epoch's and the second epoch's seconds (a callback's clock) and the process's CPU seconds; the
losses of both epochs must be the same in both contestants.

    .venv/bin/python -m bench.first_epoch [--quick] [--reps N]
"""

from __future__ import annotations

from bench._common import fmt, header, machine, median, parser, prepared_data, process_result, round_robin, save, table

BODY = """
import json, os, resource, sys, tempfile, time
import rossmann  # sets TF_USE_LEGACY_KERAS before TensorFlow's import, as the workflow's ranks do
import tensorflow as tf
if os.environ["BENCH_AUTOGRAPH"] == "1":  # Horovod 0.28.1's own subgraphs
    import horovod.tensorflow as h, horovod.tensorflow.functions as hf, horovod.tensorflow.util as hu
    h._make_subgraph = hf._make_subgraph = hu._make_subgraph = lambda f: tf.function(f)
from rossmann.train import train_rank

class Clock(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seconds, self.losses = [], []
    def on_epoch_begin(self, epoch, logs=None):
        self.started = time.perf_counter()
    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.started)
        self.losses.append(float(logs["loss"]))

clock = Clock()
train_rank(sys.argv[1], tempfile.mkdtemp(), epochs=2, callbacks=[clock])
usage = resource.getrusage(resource.RUSAGE_SELF)
print("RESULT " + json.dumps({"epochs": clock.seconds, "losses": clock.losses,
                              "cpu": usage.ru_utime + usage.ru_stime}))
"""


def _fit(prepared: str, autograph: bool, results: list) -> float:
    result = process_result(BODY, prepared, env={"BENCH_AUTOGRAPH": "1" if autograph else "0"})
    results.append(result)
    return result["epochs"][0]


def main() -> None:
    args = parser(__doc__).parse_args()
    reps = args.reps or (1 if args.quick else 5)
    header("a Horovod Keras fit's first epoch, with and without AutoGraph in Horovod's subgraphs", args.quick)
    info = machine()
    prepared = str(prepared_data(quick=True))
    results = {"autograph": [], "no autograph": []}
    first = round_robin({name: lambda name=name: _fit(prepared, name == "autograph", results[name])
                         for name in results}, reps)
    losses = {name: {tuple(r["losses"]) for r in runs} for name, runs in results.items()}
    assert losses["autograph"] == losses["no autograph"], f"the contestants trained differently: {losses}"
    cpu = {name: median([r["cpu"] for r in runs]) for name, runs in results.items()}
    rows = [[name, fmt(median(first[name])), fmt(median([r["epochs"][1] for r in results[name]])), fmt(cpu[name])]
            for name in results]
    print(table(["contestant", "first epoch s (median)", "second epoch s (median)", "process CPU s (median)"], rows))
    first_ratio = median(first["autograph"]) / median(first["no autograph"])
    cpu_ratio = cpu["autograph"] / cpu["no autograph"]
    print(f"\nRATIO autograph / no autograph first epoch = {first_ratio:.2f}x")
    print(f"RATIO autograph / no autograph process CPU = {cpu_ratio:.2f}x")
    print(f"losses, the same in both: {sorted(losses['autograph'])}")
    saved = save("first_epoch" + ("-quick" if args.quick else ""),
                 {"quick": args.quick, "reps": reps, "machine": info, "first_epoch_s": first, "runs": results,
                  "ratio_first_epoch": first_ratio, "ratio_cpu": cpu_ratio})
    print(f"saved {saved}")


if __name__ == "__main__":
    main()
