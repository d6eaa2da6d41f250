"""Training scale: samples per second on 1 rank vs 2 ranks, and Horovod's allreduce bandwidth on this host.

Training: the Rossmann model (the workflow's default network and the reference example's) trained with
``hvd.DistributedOptimizer`` on the prepared full-size training split, batch 256 per rank, through our
local launcher (``HorovodRunner(np=-N)``, the same runtime as the MPIJob task). The machine has 2 cores,
so the comparison gives both the same 2 threads: 1 rank x 2 TensorFlow threads vs 2 ranks x 1 thread
(``TF_NUM_INTRAOP_THREADS``/``TF_NUM_INTEROP_THREADS``/``OMP_NUM_THREADS``). Samples/s counts all ranks,
timed over the steps after a warm-up.

Allreduce: ``hvd.allreduce`` (sum) of 4, 64 and 256 MB float32 tensors between 2 ranks, with the Gloo
controller (TCP over the loopback interface) and the MPI controller (Open MPI, shared memory between
processes on one host), against ``numpy.copyto`` of the same size in one process as the ceiling.

    .venv/bin/python -m bench.train_scale [--quick] [--reps N]
"""

from __future__ import annotations

import contextlib
import io
import os

from bench._common import fmt, header, machine, median, parser, prepared_data, save, table

MODELS = {"workflow default [256, 128]": [256, 128], "reference [1000, 1000, 1000, 500]": [1000, 1000, 1000, 500]}
CONFIGS = {"1 rank x 2 threads": (1, 2), "2 ranks x 1 thread": (2, 1)}
SIZES_MB = [4, 64, 256]


@contextlib.contextmanager
def _threads(n: int):
    names = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS")
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update({k: str(n) for k in names})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _quiet(call):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            return call()
        except BaseException:
            import sys

            sys.__stderr__.write(out.getvalue()[-5000:])
            raise


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    reps = args.reps or (1 if args.quick else 3)
    warmup, steps = (5, 20) if args.quick else (20, 150)
    header("training scale: 1 rank vs 2 ranks on 2 cores; allreduce bandwidth", args.quick)
    info = machine()
    from bench import _train_body
    from flytekitplugins.horovod import Horovod, HorovodRunner

    prepared = str(prepared_data(args.quick))
    training = {m: {c: [] for c in CONFIGS} for m in MODELS}
    for model, hidden in MODELS.items():
        for rep in range(reps):
            for config, (ranks, threads) in CONFIGS.items():
                with _threads(threads):
                    result = _quiet(lambda: HorovodRunner(np=-ranks).run(
                        _train_body.train_throughput, prepared_dir=prepared, hidden=hidden, batch_size=256,
                        warmup=warmup, steps=steps))
                training[model][config].append(result["samples_per_second"])
                print(f"  rep {rep + 1}/{reps} {model}, {config}: {result['samples_per_second']:.0f} samples/s",
                      flush=True)
    bandwidth = {}
    for controller in ("gloo", "mpi"):
        result = _quiet(lambda: HorovodRunner(np=-2, settings=Horovod(controller=controller)).run(
            _train_body.allreduce_bandwidth, sizes_mb=SIZES_MB, reps=3 if args.quick else 7))
        bandwidth[controller] = result["results"]
        print(f"  allreduce with {controller}: done", flush=True)

    rows, speedups = [], {}
    for model, configs in training.items():
        one, two = median(configs["1 rank x 2 threads"]), median(configs["2 ranks x 1 thread"])
        speedups[model] = two / one
        for config, values in configs.items():
            rows.append([model, config, fmt(median(values), 0), " ".join(fmt(v, 0) for v in values),
                         fmt(median(values) / one) + "x"])
    print(f"\nTraining throughput, batch 256 per rank, {steps} timed steps after {warmup} warm-up steps "
          f"(samples/s of all ranks, median of {reps}; ratio = vs 1 rank x 2 threads)")
    print(table(["model", "ranks x threads", "samples/s", "all repetitions", "vs 1 rank"], rows))

    brows, ratios = [], {}
    for controller, results in bandwidth.items():
        for mb, r in results.items():
            nbytes = int(mb) * 1024 * 1024
            t, c = median(r["allreduce_seconds"]), median(r["copy_seconds"])
            ratios[f"{controller}_{mb}"] = c / t
            brows.append([controller, mb, fmt(t * 1000, 1), fmt(nbytes / t / 1e9), fmt(nbytes / c / 1e9),
                          f"{100 * c / t:.0f}%"])
    print("\nAllreduce (sum) of one float32 tensor between 2 ranks on this host, vs a memory copy of the same size "
          "(median of the repetitions; GB/s = tensor bytes / seconds)")
    print(table(["controller", "MB", "allreduce ms", "allreduce GB/s", "memcpy GB/s", "of memcpy"], brows))
    for model, s in speedups.items():
        print(f"RATIO {model}: 2 ranks x 1 thread / 1 rank x 2 threads = {s:.2f}x samples/s")
    for key, r in ratios.items():
        print(f"RATIO allreduce {key} MB bandwidth / memcpy bandwidth = {r:.2f}")
    path = save("train_scale", {"quick": args.quick, "reps": reps, "warmup": warmup, "steps": steps,
                                "machine": info, "training": training, "bandwidth": bandwidth,
                                "speedups": speedups, "bandwidth_vs_memcpy": ratios})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
