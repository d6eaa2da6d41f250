"""The Rossmann pipeline written for Flyte 2 (``workflows/rossmann_flyte2.py``), end to end as a user runs it:
``flyte run --local workflows/rossmann_flyte2.py wf`` with no arguments, on the default synthetic data."""

import re
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from tests.support import VENV_BIN, leftovers, run_command

pytest.importorskip("flyteplugins.spark", reason="flyteplugins-spark (flyteplugins-horovod's spark extra) is not installed")
# about a minute of data, Spark and training, timing nothing: with the serial tests, to even out make test's two runs
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.needs_framework("tensorflow")]


def test_flyte_run_local_wf_scores_as_the_flyte_1_workflow():
    tmp = Path(tempfile.mkdtemp(prefix="wf2-"))  # the run's TMPDIR: its task folders go there and are removed
    try:
        ran = run_command([str(VENV_BIN / "flyte"), "run", "--local", "workflows/rossmann_flyte2.py", "wf"],
                          env={"TMPDIR": str(tmp)}, timeout=600)
        assert ran.returncode == 0, ran.output[-4000:]
        scored = re.search(r"^submission.csv: test RMSPE ([\d.]+), perfect model ([\d.]+)", ran.output, re.M)
        assert scored, ran.output[-4000:]
        assert float(scored.group(1)) <= 1.10 * float(scored.group(2)), scored.group(0)  # as wf on Flyte 1
        assert "Horovod world of 2 ranks, controller gloo, framework tensorflow" in ran.output, ran.output[-4000:]
        predictions = re.search(r"o1=path='([^']+)'", ran.output)
        assert predictions, ran.output[-3000:]
        submission = pd.read_csv(Path(predictions.group(1)) / "submission.csv")
        assert list(submission.columns) == ["Id", "Sales"] and submission["Id"].is_unique
        assert leftovers(ran.marker) == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
