"""A local run's Spark driver JVM starts with the quick-start options (local_driver.py), and a user's own choice wins:
read from the running JVM, through ``pyflyte run`` of plain flytekitplugins-spark tasks."""

import ast
import os
import re

import pytest

from horovod_flyte_runtime.class_archive import _spark_home, archive_path, prune
from horovod_flyte_runtime.local_driver import use_quick_start_jvm

FLOWS = "tests/plugin/flows/local_driver_flows.py"


def _jvm(output: str):
    match = re.search(r"Jvm\(options=(\[.*?\]), collectors=(\[.*?\]), archives=(\[.*?\])\)", output)
    assert match, output[-3000:]
    return ast.literal_eval(match.group(1)), ast.literal_eval(match.group(2)), ast.literal_eval(match.group(3))


@pytest.mark.parametrize("workflow, option, collectors", [
    ("default_driver_wf", "-XX:+UseSerialGC", ["Copy", "MarkSweepCompact"]),
    # a user's collector beside ours would stop the JVM from starting ("Multiple garbage collectors selected")
    ("g1_driver_wf", "-XX:+UseG1GC", ["G1 Young Generation", "G1 Old Generation"]),
])
def test_the_local_driver_starts_quickly_unless_the_user_chose_otherwise(pyflyte_run, workflow, option, collectors):
    ran = pyflyte_run(FLOWS, workflow)
    assert ran.returncode == 0, ran.output[-3000:]
    options, running, archives = _jvm(ran.output)
    assert "-XX:TieredStopAtLevel=1" in options and option in options, options
    assert running[:2] == collectors, running
    assert not (option == "-XX:+UseG1GC" and "-XX:+UseSerialGC" in options), options
    # the class archive the set-up made (scripts/setup.sh), really mapped, with either collector
    assert str(archive_path()) in archives and f"-XX:SharedArchiveFile={archive_path()}" in options, (archives, options)


def test_a_driver_with_another_class_path_starts_without_the_class_archive_and_says_nothing(pyflyte_run):
    """An archive made from Spark's jars alone would not match (Java would warn and ignore it): left out."""
    ran = pyflyte_run(FLOWS, "other_class_path_driver_wf")
    assert ran.returncode == 0, ran.output[-3000:]
    options, _, archives = _jvm(ran.output)
    assert str(archive_path()) not in archives and not any("SharedArchiveFile" in o for o in options), options
    assert "cds" not in ran.output, ran.output[-3000:]


def test_each_quick_start_option_yields_to_the_users_own(monkeypatch):
    for name in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    archive = f"-XX:SharedArchiveFile={archive_path()} -Xlog:cds=off -Xlog:cds+dynamic=off"
    use_quick_start_jvm({})
    use_quick_start_jvm({})  # a second session in the same process: not repeated
    assert os.environ["SPARK_SUBMIT_OPTS"] == f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC {archive}"
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Dx=1 -XX:-TieredCompilation -Xshare:off")
    use_quick_start_jvm({"spark.driver.defaultJavaOptions": "-XX:+UseParallelGC"})
    assert os.environ["SPARK_SUBMIT_OPTS"] == "-Dx=1 -XX:-TieredCompilation -Xshare:off"
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:+UseZGC")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC {archive}")  # an earlier call's
    use_quick_start_jvm({})
    assert os.environ["SPARK_SUBMIT_OPTS"] == f"-XX:TieredStopAtLevel=1 {archive}"
    use_quick_start_jvm({"spark.driver.extraClassPath": "/opt/extra.jar"})  # Spark's jars and more: another class path
    assert os.environ["SPARK_SUBMIT_OPTS"] == "-XX:TieredStopAtLevel=1"


def test_the_archives_of_removed_spark_installs_are_removed_and_others_kept(tmp_path):
    """Each new environment's Spark gets its own archive (~190 MB): one a set-up made for an environment since
    removed must not stay forever (13 of them, 2.3 GB, were found on a machine that set up clean clones all day)."""
    gone = tmp_path / "removed-env" / "pyspark"
    (gone / "jars").mkdir(parents=True)
    archives = {name: tmp_path / "cache" / f"{name}.jsa" for name in ("current", "live", "gone", "unnoted")}
    archives["current"].parent.mkdir()
    for name, archive in archives.items():
        archive.write_bytes(b"archive")
    archives["live"].with_suffix(".spark").write_text(f"{_spark_home()}\n")
    archives["gone"].with_suffix(".spark").write_text(f"{gone}\n")
    prune(archives["current"])
    assert all(archives[name].is_file() for name in ("current", "live", "gone")) and not archives["unnoted"].exists()
    assert archives["current"].with_suffix(".spark").read_text() == f"{_spark_home()}\n"  # noted for later prunes
    (gone / "jars").rmdir()
    prune(archives["current"])
    assert sorted(p.name for p in archives["current"].parent.iterdir()) == \
        ["current.jsa", "current.spark", "live.jsa", "live.spark"]
