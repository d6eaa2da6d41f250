"""docs/reliability.md is the output of scripts/reliability.py: one row per case the script has, each as designed."""

import importlib.util
import re

from tests.conftest import ROOT


def _script():
    spec = importlib.util.spec_from_file_location("reliability", ROOT / "scripts" / "reliability.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reliability_table_has_a_row_per_case_of_the_script_and_all_are_as_designed(tmp_path):
    script = _script()
    cases = script.cases(tmp_path)
    rows = [line for line in (ROOT / "docs" / "reliability.md").read_text().splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == len(cases) >= 60, "re-run scripts/reliability.py: the table and the cases differ"
    for row, case in zip(rows, cases):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        assert cells[2] == case.what, f"row {cells[0]}: {cells[2]!r} is not the script's case {case.what!r}"
        assert cells[-1] == "yes", f"row {cells[0]} ({case.what}) was not as designed: {cells[3]}"
