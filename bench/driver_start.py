"""A local Spark driver's start with and without the class archive (horovod_flyte_runtime.class_archive).

Contestants, each a fresh process that starts a local session the way a ``HorovodSpark`` task's local run does
(``prepare_local_session``: the quick-start JVM options) and runs one small job:
  * ``no archive``: the user's JVM options choose class data sharing (``-Xshare:auto``, Java's default), so the plugin
    adds no archive (the baseline)
  * ``archive``: the plugin's default where ``python -m horovod_flyte_runtime.class_archive`` has made it

Measured: the wall time of the whole process, and the machine's CPU time over it (from /proc/stat: the driver JVM
is not this process's child once pyspark exits, so its own accounting would miss it; hence an idle machine).

    .venv/bin/python -m bench.driver_start [--quick] [--reps N]
"""

from __future__ import annotations

import os
import subprocess
import time

from bench._common import PYTHON, fmt, header, machine, median, parser, round_robin, save, table

SESSION = """
from pyspark.sql import SparkSession
from horovod_flyte_runtime.spark_session import prepare_local_session
conf = prepare_local_session(2)
spark = SparkSession.builder.config(map=conf).getOrCreate()
assert spark.range(1000).selectExpr("id % 7 as k").groupBy("k").count().count() == 7
spark.stop()
"""


def _machine_cpu_seconds() -> float:
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq = map(int, f.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _start(extra: dict, cpu: list) -> float:
    before, start = _machine_cpu_seconds(), time.perf_counter()
    subprocess.run([PYTHON, "-c", SESSION], env={**os.environ, **extra}, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=300)
    wall = time.perf_counter() - start
    cpu.append(_machine_cpu_seconds() - before)
    return wall


def main() -> None:
    from horovod_flyte_runtime.class_archive import archive_path, make_archive

    args = parser(__doc__).parse_args()
    reps = args.reps or (1 if args.quick else 5)
    header("a local Spark driver's start, with and without the class archive", args.quick)
    info = machine()
    path = archive_path()
    if path is None or not path.is_file():
        make_archive()
    cpu = {"no archive": [], "archive": []}
    walls = round_robin({"no archive": lambda: _start({"SPARK_SUBMIT_OPTS": "-Xshare:auto"}, cpu["no archive"]),
                         "archive": lambda: _start({}, cpu["archive"])}, reps)
    rows = [[name, fmt(median(walls[name])), fmt(median(cpu[name]))] for name in walls]
    print(table(["contestant", "wall s (median)", "machine CPU s (median)"], rows))
    wall_ratio = median(walls["no archive"]) / median(walls["archive"])
    cpu_ratio = median(cpu["no archive"]) / median(cpu["archive"])
    print(f"\nRATIO no archive / archive wall = {wall_ratio:.2f}x")
    print(f"RATIO no archive / archive machine CPU = {cpu_ratio:.2f}x")
    saved = save("driver_start" + ("-quick" if args.quick else ""),
                 {"quick": args.quick, "reps": reps, "machine": info, "archive": str(path),
                  "wall_s": walls, "machine_cpu_s": cpu, "ratio_wall": wall_ratio, "ratio_cpu": cpu_ratio})
    print(f"saved {saved}")


if __name__ == "__main__":
    main()
