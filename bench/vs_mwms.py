"""Horovod against what users pick instead, Keras: the Rossmann Keras model fitted with the same rows, batches,
optimizer, rate scaling and steps (bench/_keras_body.py), 2 ranks x 1 thread, side by side, round-robin:

* ``horovod gloo``: ``horovodrun --gloo`` running ``horovod.tensorflow.keras.DistributedOptimizer`` in ``model.fit``;
* ``horovod mpirun``: ``horovodrun --mpi`` (``mpirun``), the same body;
* ``MWMS``: ``tf.distribute.MultiWorkerMirroredStrategy``, two workers on this host (``TF_CONFIG``), ``model.fit``;
* ``one process``: the global batch in one process on both cores.

Samples per second (both ranks' samples, steps after the warm-up only) and the loss after the same steps (MAE of log
sales on the same 4,096 rows: the contestants must train the same model); RATIO lines of Horovod against MWMS.

    .venv/bin/python -m bench.vs_mwms            # 3 repetitions each, about 8 minutes on 2 cores
    .venv/bin/python -m bench.vs_mwms --quick    # one short repetition each
"""

from __future__ import annotations

from typing import Dict, List

from bench._common import PYTHON, VENV_BIN, header, machine, median, parser, save, table
from bench.vs_ddp import contestant_runs, prepared

HIDDEN = "256,128"  # the Rossmann defaults
STEPS = 200


def commands(data: str, steps: int, warmup: int) -> Dict[str, List[str]]:
    body = ["-m", "bench._keras_body", "--prepared", data, "--hidden", HIDDEN, "--steps", str(steps),
            "--warmup", str(warmup)]
    horovodrun = [str(VENV_BIN / "horovodrun"), "-np", "2", "-H", "localhost:2"]
    return {
        "horovod gloo": [*horovodrun, "--gloo", PYTHON, *body, "--mode", "horovod"],
        "horovod mpirun": [*horovodrun, "--mpi", PYTHON, *body, "--mode", "horovod"],
        "MWMS": [PYTHON, *body, "--mode", "mwms"],
        "one process": [PYTHON, *body, "--mode", "single", "--threads", "2"],
    }


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=STEPS, help="timed steps (default: %(default)s)")
    args = p.parse_args()
    reps = args.reps or (1 if args.quick else 3)
    steps = 20 if args.quick else args.steps
    header("Horovod vs tf.distribute.MultiWorkerMirroredStrategy vs one process (Keras)", args.quick)
    data = str(prepared(args.quick))
    print(f"\nRossmann Keras model ({HIDDEN}), {steps} steps after 10 warm-up steps, batch 512 per rank", flush=True)
    samples, runs = contestant_runs(commands(data, steps, 10), reps)
    mwms = median(samples["MWMS"])
    rows = [[name, f"{median(values):,.0f}", f"{median(values) / mwms:.2f}x",
             f"{median([r['final_loss'] for r in runs[name]]):.4f}", ", ".join(f"{v:,.0f}" for v in values)]
            for name, values in samples.items()]
    print(table(["contestant", "samples/s (median)", "vs MWMS", "loss after the steps", "each run"], rows))
    for name in ("horovod gloo", "horovod mpirun"):
        print(f"RATIO rossmann keras: {name} / MWMS samples per second = {median(samples[name]) / mwms:.2f}x")
    results = {"machine": machine(), "reps": reps, "hidden": HIDDEN, "steps": steps, "samples_per_s": samples,
               "runs": runs}
    name = "vs_mwms" + ("-quick" if args.quick else "" if args.steps == STEPS else "-custom")
    print(f"results: {save(name, results)}")


if __name__ == "__main__":
    main()
