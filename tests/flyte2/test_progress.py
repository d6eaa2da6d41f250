"""Live progress in a Flyte 2 task's report (``@env.task(report=True)``): while the ranks train, rank 0's epoch lines
are in the report file Flyte 2 writes (a local run's, under ``/tmp/flyte/metadata``), with epochs done of total and
the time left and a curve of the loss, flushed as they happen, not only at the end."""

import glob
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support import ROOT, leftovers, user_env

pytestmark = pytest.mark.needs_framework("pytorch")
pytest.importorskip("flyteplugins.horovod", reason="flyteplugins-horovod (and the flyte SDK) is not installed here")

RUN = """
import sys

import flyte

from tests.flyte2.flows import allreduce as flows

flyte.init()
print("result:", flyte.run(flows.epochs_in_the_report, epochs=4, seconds=2.0, tag=sys.argv[1]).outputs()[0])
"""


def _report(tag: str) -> str:
    """The text of this run's report (found by the tag in its lines), or "" before its first flush."""
    for path in glob.glob("/tmp/flyte/metadata/*/*/report.html"):
        text = Path(path).read_text(errors="replace")
        if tag in text:
            return text
    return ""


def test_the_report_shows_the_epochs_while_the_ranks_train():
    tag, marker = f"progress-{uuid.uuid4().hex}", f"HVD_TEST_RUN_{uuid.uuid4().hex}"
    proc = subprocess.Popen([sys.executable, "-c", RUN, tag], cwd=ROOT, env=user_env({marker: "1"}),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen_mid_run = []
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            report = _report(tag)
            if "epoch 1 of 4 done" in report and "epoch 4/4" not in report:
                seen_mid_run.append(report)
            time.sleep(0.2)
        output, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, output[-3000:]
    assert "result: 4 epochs" in output
    assert seen_mid_run, f"the report never showed epoch 1 before the last epoch; at the end:\n{_report(tag)[-2000:]}"
    assert f"epoch 1/4: loss 1.0000 ({tag})" in seen_mid_run[0]  # rank 0's line itself, escaped HTML of it
    final = _report(tag)
    assert "epoch 4 of 4 done" in final and "about 0 s left" in final, final[-2000:]
    assert all(f"<td>{epoch}/4</td>" in final for epoch in range(1, 5)), final[-2000:]  # one table row an epoch
    # the loss curve: the flow's loss is 1/epoch, averaged over the ranks, so it ends at 0.25 from 1
    assert 'aria-label="loss: 0.25 at epoch 4 (from 0.25 to 1)"' in final, final[-2000:]
    assert final.count("<polyline") == 1, final[-2000:]  # the loss is the only metric of these lines
    assert leftovers(marker) == []
