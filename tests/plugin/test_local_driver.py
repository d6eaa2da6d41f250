"""A local run's Spark driver JVM starts with the quick-start options (local_driver.py), and a user's own choice wins:
read from the running JVM, through ``pyflyte run`` of plain flytekitplugins-spark tasks."""

import ast
import os
import re

import pytest

from horovod_flyte_runtime.local_driver import use_quick_start_jvm

FLOWS = "tests/plugin/flows/local_driver_flows.py"


def _jvm(output: str):
    match = re.search(r"Jvm\(options=(\[.*?\]), collectors=(\[.*?\])\)", output)
    assert match, output[-3000:]
    return ast.literal_eval(match.group(1)), ast.literal_eval(match.group(2))


@pytest.mark.parametrize("workflow, option, collectors", [
    ("default_driver_wf", "-XX:+UseSerialGC", ["Copy", "MarkSweepCompact"]),
    # a user's collector beside ours would stop the JVM from starting ("Multiple garbage collectors selected")
    ("g1_driver_wf", "-XX:+UseG1GC", ["G1 Young Generation", "G1 Old Generation"]),
])
def test_the_local_driver_starts_quickly_unless_the_user_chose_otherwise(pyflyte_run, workflow, option, collectors):
    ran = pyflyte_run(FLOWS, workflow)
    assert ran.returncode == 0, ran.output[-3000:]
    options, running = _jvm(ran.output)
    assert "-XX:TieredStopAtLevel=1" in options and option in options, options
    assert running[:2] == collectors, running
    assert not (option == "-XX:+UseG1GC" and "-XX:+UseSerialGC" in options), options


def test_each_quick_start_option_yields_to_the_users_own(monkeypatch):
    for name in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    use_quick_start_jvm({})
    use_quick_start_jvm({})  # a second session in the same process: not repeated
    assert os.environ["SPARK_SUBMIT_OPTS"] == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Dx=1 -XX:-TieredCompilation")
    use_quick_start_jvm({"spark.driver.defaultJavaOptions": "-XX:+UseParallelGC"})
    assert os.environ["SPARK_SUBMIT_OPTS"] == "-Dx=1 -XX:-TieredCompilation"
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:+UseZGC")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")  # an earlier call's
    use_quick_start_jvm({})
    assert os.environ["SPARK_SUBMIT_OPTS"] == "-XX:TieredStopAtLevel=1"
