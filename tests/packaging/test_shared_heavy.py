"""make test's two pytest runs share the heavy tests (tests/support/shared_heavy.py): run as scripts/test.sh runs
them, over a folder of tests that record where they ran, each heavy test runs in exactly one of the two, after that
run's own tests, and each run's summary names those the other ran."""

import os
import subprocess
import sys
import textwrap

from tests.support import ROOT

TESTS = '''
import os, time
import pytest

def _ran(name):
    with open(os.environ["RAN_LOG"], "a") as log:
        inherited = [v for v in ("FLYTE_HOROVOD_TEST_SHARE", "FLYTE_HOROVOD_TEST_HEAVY_FROM_LAST") if v in os.environ]
        log.write(f"{os.environ['RUN']} {name} {','.join(inherited) or '-'}\\n")

@pytest.mark.serial
@pytest.mark.parametrize("i", range(2))
def test_timing(i):
    _ran(f"serial{i}")
    time.sleep(0.5)

@pytest.mark.parametrize("i", range(4))
def test_other(i):
    _ran(f"other{i}")

@pytest.mark.heavy
@pytest.mark.parametrize("i", range(6))
def test_heavy(i):
    _ran(f"heavy{i}")
    time.sleep(0.3)
'''

CONFTEST = '''
from tests.support.shared_heavy import SharedHeavyTests

def pytest_configure(config):
    config.addinivalue_line("markers", "serial: timing")
    config.addinivalue_line("markers", "heavy: shared")
    shared = SharedHeavyTests.from_environment()
    if shared:
        config.pluginmanager.register(shared, "shared_heavy")
'''


def test_each_heavy_test_runs_once_in_one_of_the_two_runs(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_split.py").write_text(textwrap.dedent(TESTS))
    share, ran_log = tmp_path / "share", tmp_path / "ran.log"
    share.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLYTE_HOROVOD_TEST_SHARE": str(share), "RAN_LOG": str(ran_log)}
    common = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir",
              str(tmp_path), "-c", os.devnull, str(tmp_path)]
    serial = subprocess.Popen([*common, "-m", "serial or heavy"], env={**env, "RUN": "serial"}, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    other = subprocess.run([*common, "-m", "not serial"], env={**env, "RUN": "other",
                           "FLYTE_HOROVOD_TEST_HEAVY_FROM_LAST": "1"}, cwd=tmp_path, capture_output=True, text=True)
    serial_out = serial.communicate(timeout=120)[0]
    assert other.returncode == 0 and serial.returncode == 0, other.stdout + serial_out
    ran = [line.split() for line in ran_log.read_text().splitlines()]
    # a pytest a test starts is not one of the two runs (it ran heavy tests from the last in CI's serial run)
    assert {seen for _, _, seen in ran} == {"-"}, ran
    ran = [(run, name) for run, name, _ in ran]
    heavy = [name for _, name in ran if name.startswith("heavy")]
    assert sorted(heavy) == [f"heavy{i}" for i in range(6)], ran  # each once
    by_run = {run: [name for r, name in ran if r == run] for run in ("serial", "other")}
    assert by_run["serial"][:2] == ["serial0", "serial1"] and by_run["other"][:4] == [f"other{i}" for i in range(4)]
    # the serial run takes them from the first, the other from the last
    serial_heavy = [n for n in by_run["serial"] if n.startswith("heavy")]
    other_heavy = [n for n in by_run["other"] if n.startswith("heavy")]
    assert serial_heavy == sorted(serial_heavy) and other_heavy == sorted(other_heavy, reverse=True), by_run
    assert serial_heavy and other_heavy, by_run  # both took some: the other run's own tests are quick
    for out, there in ((serial_out, other_heavy), (other.stdout, serial_heavy)):
        assert f"{6 - len(there)} ran here, {len(there)} there" in out, out
        assert all(f"ran in the other run: test_split.py::test_heavy[{n[5:]}]" in out for n in there), out
