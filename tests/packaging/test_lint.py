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
    # complements (De Morgan): every test runs in exactly one of the two
    assert '-m pytest -m "serial or heavy"' in script and '-m pytest -m "not serial and not heavy"' in script


def test_a_lint_error_fails_and_the_tree_is_clean(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    ran = subprocess.run([RUFF, "check", "--config", str(ROOT / "pyproject.toml"), str(bad)], capture_output=True,
                         text=True)
    assert ran.returncode == 1 and "F401" in ran.stdout, ran.stdout
    tree = subprocess.run([RUFF, "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert tree.returncode == 0, tree.stdout[-3000:]
