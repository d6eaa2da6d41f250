"""The class-data-sharing archive of a local Spark driver: the classes a local session loads, mapped from one file
instead of read, verified and parsed out of Spark's jars at every start (about 6 s of CPU and of wall time less per
local session on 2 cores; docs/spark-route.md).

``python -m horovod_flyte_runtime.class_archive`` makes it, once per Java and Spark installation (``scripts/setup.sh``
runs it): a small local session whose JVM writes the archive when it exits (``-XX:ArchiveClassesAtExit``), into a
temporary file renamed into place only once that JVM has exited, since a JVM that maps a half-written archive
crashes. ``local_driver`` then starts a local driver with ``-XX:SharedArchiveFile`` where the archive of its Java
and Spark jars exists and its class path is Spark's own. Java uses an archive that does not match its classes
as none at all; its warnings about that are switched off with it. Each archive (about 190 MB) notes the Spark
install it was made for, and making or finding one removes those whose install is gone (a removed environment's).
"""

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import List, Mapping, Optional

import psutil

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "flytekitplugins-horovod" / "spark-driver"
# what makes a driver's class path other than Spark's jars, for which an archive made from those would not match
OTHER_CLASS_PATH = ("SPARK_CLASSPATH", "SPARK_DIST_CLASSPATH")
SILENT = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def _java() -> Optional[Path]:
    """The java that ``spark-submit`` starts: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = Path(home, "bin", "java") if home else shutil.which("java")
    return Path(java).resolve() if java and Path(java).exists() else None


def _spark_home() -> Optional[Path]:
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    spec = importlib.util.find_spec("pyspark")
    return Path(spec.origin).parent if spec and spec.origin else None


def archive_path() -> Optional[Path]:
    """Where the archive for the Java and the Spark jars a local driver starts with is kept, made or not; None
    without a Java or Spark's jars. Named by their paths, sizes and times, so a changed install gets its own."""
    java, home = _java(), _spark_home()
    if java is None or home is None or not (home / "jars").is_dir():
        return None
    files = [java, *java.parents[1].glob("lib/server/libjvm.so"), *sorted((home / "jars").glob("*.jar"))]
    digest = hashlib.sha256(os.environ.get("SPARK_CONF_DIR", "").encode())
    for file in files:
        stat = file.stat()
        digest.update(f"{file}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return CACHE / f"{digest.hexdigest()[:16]}.jsa"


def archive_options(spark_conf: Mapping[str, str], users_options: str) -> List[str]:
    """The JVM options that map the archive into a local driver started with ``spark_conf``: none where it is not
    made, where the driver's class path differs from Spark's jars, or where the user's own JVM options already
    choose class data sharing."""
    path = archive_path()
    if (path is None or not path.is_file() or "spark.driver.extraClassPath" in spark_conf
            or any(os.environ.get(name) for name in OTHER_CLASS_PATH)
            or any(choice in users_options for choice in ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit"))):
        return []
    return [f"-XX:SharedArchiveFile={path}", *SILENT]


def _typical_work(spark, folder: Path) -> None:
    """What local Rossmann and Horovod tasks do, on a few rows: their classes are the ones archived."""
    import pandas as pd
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    rows = pd.DataFrame({"Store": [1, 1, 2, 2], "Date": pd.date_range("2015-07-01", periods=4).astype(str),
                         "Sales": [5.0, 6.0, 7.0, 8.0], "StateHoliday": ["0", "a", "0", "0"]})
    rows.to_csv(folder / "train.csv", index=False)
    frame = spark.read.csv(str(folder / "train.csv"), header=True, inferSchema=True)
    by_store = Window.partitionBy("Store").orderBy("Date")
    frame = (frame.withColumn("Date", F.to_date("Date")).withColumn("Previous", F.lag("Sales").over(by_store))
             .join(frame.groupBy("Store").agg(F.avg("Sales").alias("Mean")), "Store"))
    frame.write.parquet(str(folder / "features"))
    spark.read.parquet(str(folder / "features")).toPandas()
    spark.createDataFrame(rows).mapInPandas(lambda batches: batches, "Store long, Date string, Sales double, "
                                            "StateHoliday string").collect()
    spark.sparkContext.parallelize(range(2), 2).barrier().mapPartitions(lambda part: part).collect()


def _note_install(archive: Path) -> None:
    archive.with_suffix(".spark").write_text(f"{_spark_home()}\n")


def prune(keep: Path) -> None:
    """Remove the archives beside ``keep`` whose Spark install is gone, or unnoted (made before installs were noted:
    a live one is made again by the next set-up); note ``keep``'s own install if it is made."""
    if keep.is_file() and not keep.with_suffix(".spark").is_file():
        _note_install(keep)
    for archive in keep.parent.glob("*.jsa"):
        noted = archive.with_suffix(".spark")
        home = Path(noted.read_text().strip()) if noted.is_file() else None
        if archive != keep and (home is None or not (home / "jars").is_dir()):
            print(f"[class-archive] removing the archive of a Spark install that is gone: {archive}", flush=True)
            archive.unlink(missing_ok=True)
            noted.unlink(missing_ok=True)


def make_archive() -> Path:
    """Make the archive for this Java and Spark where it is not made yet; return its path."""
    from pyspark.sql import SparkSession

    from .spark_session import prepare_local_session

    path = archive_path()
    if path is None:
        raise SystemExit("class_archive: needs java (JAVA_HOME or PATH) and pyspark's jars")
    prune(path)
    if path.is_file():
        print(f"[class-archive] the local Spark driver's class archive is made: {path}", flush=True)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob("*.tmp"):  # left by a run that was killed
        if not psutil.pid_exists(int(stale.suffixes[-2][1:])):
            stale.unlink(missing_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    print(f"[class-archive] making the local Spark driver's class archive (under a minute): {path}", flush=True)
    conf = prepare_local_session(2)
    # SILENT: not the hundreds of "Skipping <class>" lines of a dump
    os.environ["SPARK_SUBMIT_OPTS"] += " ".join(["", f"-XX:ArchiveClassesAtExit={partial}", *SILENT])
    spark = SparkSession.builder.appName("class-archive").config(map=conf).getOrCreate()
    jvm = spark.sparkContext._gateway.proc
    try:
        with tempfile.TemporaryDirectory() as folder:
            _typical_work(spark, Path(folder))
    finally:
        spark.stop()
        jvm.stdin.close()  # the driver JVM exits when its standard input closes, writing the archive first
        jvm.wait(timeout=600)
    if jvm.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        raise SystemExit(f"class_archive: the driver JVM exited with {jvm.returncode} and wrote no archive; a local "
                         "driver starts without one (slower, nothing else changes)")
    os.replace(partial, path)
    _note_install(path)
    print(f"[class-archive] made: {path} ({path.stat().st_size >> 20} MiB)", flush=True)
    return path


if __name__ == "__main__":
    make_archive()
