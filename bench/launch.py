"""Launch overhead: wall time from starting a 2-rank job (import TensorFlow, one allreduce) to its result.

Contestants, all running bench/_body.py's work on 2 ranks on this machine:
  * ``mpirun -np 2 python bench/_body.py``           (the baseline: plain Open MPI, no Horovod launcher)
  * ``horovodrun -np 2 --gloo python bench/_body.py``
  * ``horovod.runner.run(fn, num_proc=2)``           (Horovod's Python API, same body, no Flyte)
  * our MPIJob task, controller gloo and mpi          (called in this process, flytekit and the plugin imported)
  * the same MPIJob task launched the previous way    (``horovod.runner.run`` around the rank job: the "before")
  * on one warm SparkSession (inside a HorovodSpark task): ``horovod.spark.run`` vs our ``spark_run``
    (after one untimed call of each, which is reported as "first call in the session")
  * a cold SparkSession's start (new JVM + first job), for what the Spark route costs from nothing

Targets: the MPIJob task within 1.5x of plain mpirun; ``spark_run`` at least 2x faster than horovod.spark.run.

    .venv/bin/python -m bench.launch [--quick] [--reps N]
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from bench._common import PYTHON, ROOT, fmt, header, machine, median, parser, round_robin, run_wall, save, table, timed

BODY = str(ROOT / "bench" / "_body.py")
MPIRUN = ["mpirun", "--allow-run-as-root", "-np", "2", "-bind-to", "none", "-map-by", "slot", PYTHON, BODY]
HOROVODRUN = ["horovodrun", "-np", "2", "--gloo", PYTHON, BODY]
# a bare session on purpose, in a fresh process: what a Spark route costs from nothing (not the tasks' session)
COLD_SPARK = """
import time; start = time.perf_counter()
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.parallelize(range(2), 2).map(lambda x: x).collect()
print(f"COLD {time.perf_counter() - start:.3f}")
spark.stop()
"""


def _quiet(call):
    """Run ``call`` with this process's stdout/stderr captured (the ranks' forwarded output lands there),
    as the subprocess contestants' output is captured."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            return call()
        except BaseException:
            sys.__stderr__.write(out.getvalue()[-5000:])
            raise


def _check(value) -> None:
    if value != 3.0:
        raise AssertionError(f"expected an allreduce of 3.0, got {value}")


def _horovod_runner_run() -> None:
    import horovod.runner

    from bench import _body

    _check(horovod.runner.run(_body.init_and_allreduce, num_proc=2, hosts="localhost:2", use_gloo=True,
                              disable_cache=True)[0])


def _before_gloo() -> float:
    from bench import _before, _tasks

    with _before.previous_launcher():
        return _tasks.allreduce_gloo()


def _cold_spark() -> float:
    import subprocess

    out = subprocess.run([PYTHON, "-c", COLD_SPARK], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, check=True).stdout
    return float(out.split("COLD")[1])


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    reps = args.reps or (2 if args.quick else 5)
    spark_reps = args.reps or (1 if args.quick else 3)
    header("launch overhead: 2 ranks, import TensorFlow + one allreduce", args.quick)
    info = machine()

    from bench import _tasks  # flytekit and the plugin are imported, as in a user's workflow process

    contestants = {
        "mpirun -np 2 (plain script)": lambda: run_wall(MPIRUN, expect="RESULT 3.0"),
        "horovodrun -np 2 --gloo": lambda: run_wall(HOROVODRUN, expect="RESULT 3.0"),
        "horovod.runner.run (Python API, gloo)": lambda: timed(lambda: _quiet(_horovod_runner_run)),
        "MPIJob task, controller gloo (ours)": lambda: timed(lambda: _check(_quiet(_tasks.allreduce_gloo))),
        "MPIJob task, controller mpi (ours)": lambda: timed(lambda: _check(_quiet(_tasks.allreduce_mpi))),
        "MPIJob task, gloo, previous launcher": lambda: timed(lambda: _check(_quiet(_before_gloo))),
    }
    print("warm-up round (not counted: fills the page cache for every contestant alike)", flush=True)
    round_robin(contestants, 1)
    local = round_robin(contestants, reps)

    print("Spark route: one HorovodSpark task, its warm SparkSession for both contestants", flush=True)
    spark_out = json.loads(_quiet(lambda: _tasks.spark_launches(reps=spark_reps)))
    spark = spark_out["samples"]
    cold = round_robin({"cold SparkSession (new JVM + first 2-task job)": _cold_spark}, spark_reps)

    base = median(local["mpirun -np 2 (plain script)"])
    rows = [[name, fmt(median(v)), fmt(median(v) / base) + "x", " ".join(fmt(x) for x in v)]
            for name, v in local.items()]
    print("\nMPI route and launchers (seconds, median of %d; ratio = median / plain mpirun's)" % reps)
    print(table(["launcher", "median s", "vs mpirun", "all repetitions"], rows))
    hsr, ours = median(spark["horovod.spark.run"]), median(spark["spark_run (ours)"])
    cold_s = median(cold["cold SparkSession (new JVM + first 2-task job)"])
    srows = [[name, fmt(median(v)), fmt(hsr / median(v)) + "x", " ".join(fmt(x) for x in v)]
             for name, v in spark.items()]
    for name, seconds in spark_out["first"].items():
        srows.append([f"{name}, first call in the session", fmt(seconds), fmt(spark_out["first"]["horovod.spark.run"]
                                                                            / seconds) + "x", fmt(seconds)])
    srows.append(["cold SparkSession start (new JVM + first job)", fmt(cold_s), "",
                  " ".join(fmt(x) for x in cold["cold SparkSession (new JVM + first 2-task job)"])])
    print(f"\nSpark route on a warm SparkSession ({spark_out['master']}; seconds, median of {spark_reps}; "
          "speed-up = horovod.spark.run's median / this one's)")
    print(table(["launcher", "median s", "speed-up", "all repetitions"], srows))

    gloo = median(local["MPIJob task, controller gloo (ours)"]) / base
    mpi = median(local["MPIJob task, controller mpi (ours)"]) / base
    speedup = hsr / ours
    print(f"\nRATIO MPIJob task gloo / plain mpirun = {gloo:.2f}x (target <= 1.5x: {'met' if gloo <= 1.5 else 'MISSED'})")
    print(f"RATIO MPIJob task mpi  / plain mpirun = {mpi:.2f}x (target <= 1.5x: {'met' if mpi <= 1.5 else 'MISSED'})")
    print(f"RATIO horovod.spark.run / spark_run   = {speedup:.2f}x faster (target >= 2x: "
          f"{'met' if speedup >= 2 else 'MISSED'}); cold session adds {cold_s:.1f} s")
    path = save("launch", {"quick": args.quick, "reps": reps, "spark_reps": spark_reps, "machine": info,
                           "local": local, "spark": spark, "spark_master": spark_out["master"],
                           "spark_first_call": spark_out["first"],
                           "cold_spark_session": cold["cold SparkSession (new JVM + first 2-task job)"],
                           "ratios": {"gloo_vs_mpirun": gloo, "mpi_vs_mpirun": mpi,
                                      "horovod_spark_run_vs_spark_run": speedup}})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
