"""The per-test CPU table make test prints at the end (tests/support/cpu_accounting.py): a test's child processes
count to it, a test that waits costs nothing, a fixture shared between tests has its own row."""

import os
import re
import sys

import pytest

from tests.conftest import ROOT, run_command

TESTS = '''
import subprocess, sys, time

import pytest

BURN = [sys.executable, "-c", "import time\\nend = time.process_time() + 1.5\\nwhile time.process_time() < end: pass"]

@pytest.fixture(scope="module")
def burner():
    subprocess.run(BURN, check=True)

def test_burns_in_a_child():
    subprocess.run(BURN, check=True)

def test_waits(burner):
    time.sleep(1.5)
'''


@pytest.mark.skipif(not os.access("/sys/fs/cgroup/cpuacct", os.W_OK), reason="needs cgroup v1's cpuacct, writable")
def test_a_child_s_cpu_counts_to_its_test_a_shared_fixture_s_to_its_own_row(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_configure  # noqa: F401\n")
    (tmp_path / "test_costs.py").write_text(TESTS)
    ran = run_command([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(tmp_path)],
                      env={"PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert ran.returncode == 0, ran.output[-3000:]
    rows = dict((name, (float(cpu), float(wall))) for cpu, wall, name in
                re.findall(r"^\s*([\d.]+) cpu\s+([\d.]+) wall  (?:\S+::)?(.+)$", ran.output, re.M))
    assert set(rows) == {"test_burns_in_a_child", "test_waits", "module fixture burner (test_costs.py)"}, ran.output
    assert rows["test_burns_in_a_child"][0] >= 1.4, rows
    assert rows["module fixture burner (test_costs.py)"][0] >= 1.4, rows  # not counted to the test that used it
    assert rows["test_waits"][0] < 0.5 and rows["test_waits"][1] >= 1.5, rows
    (table,) = (tmp_path / ".cache" / "test-cpu").iterdir()  # every test's row, for more than the printed ones
    assert sorted(line.split("\t")[2].rsplit("::", 1)[-1] for line in table.read_text().splitlines()) == sorted(rows)
