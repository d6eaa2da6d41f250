"""`make test` runs ruff (flytekit's settings, pyproject.toml) before pytest, and a lint error fails it."""

import subprocess

from tests.support import ROOT, VENV_BIN

RUFF = str(VENV_BIN / "ruff")


def test_make_test_lints_before_pytest():
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    steps = dry.splitlines()
    lint = next(i for i, step in enumerate(steps) if "ruff check" in step)
    tests = next(i for i, step in enumerate(steps) if "scripts/test.sh" in step)  # two pytest runs side by side
    assert lint < tests, dry
    script = (ROOT / "scripts" / "test.sh").read_text()
    # between them every test, the heavy ones in both (each runs in one: tests/packaging/test_shared_heavy.py)
    assert '-m pytest -m "serial or heavy"' in script and '-m pytest -m "not serial"' in script
    assert "FLYTE_HOROVOD_TEST_SHARE" in script and "FLYTE_HOROVOD_TEST_HEAVY_FROM_LAST=1" in script


def test_a_lint_error_fails_and_the_tree_is_clean(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    ran = subprocess.run([RUFF, "check", "--config", str(ROOT / "pyproject.toml"), str(bad)], capture_output=True,
                         text=True)
    assert ran.returncode == 1 and "F401" in ran.stdout, ran.stdout
    tree = subprocess.run([RUFF, "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert tree.returncode == 0, tree.stdout[-3000:]
