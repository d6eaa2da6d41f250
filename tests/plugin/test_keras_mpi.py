"""Keras on the MPI route, run as a user runs it (``pyflyte run``): a ``tf.keras`` fit through Horovod's
``DistributedOptimizer`` whose 2 ranks end with identical weights, under Gloo and mpirun; and, where Keras 3 is
installed, a Keras 3 optimizer refused by name instead of training without averaging (horovod issue 4290)."""

import importlib.metadata
import re

import pytest

FLOWS = "tests/plugin/flows/keras_flows.py"


def _keras_major() -> int:
    try:
        return int(importlib.metadata.version("keras").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return 0


@pytest.mark.smoke
@pytest.mark.parametrize("workflow", ["keras_gloo_wf", "keras_mpirun_wf"])
def test_a_keras_fit_on_two_ranks_ends_with_identical_weights(pyflyte_run, workflow):
    ran = pyflyte_run(FLOWS, workflow)
    assert ran.returncode == 0, ran.output[-3000:]
    match = re.search(r"Fit\(size=(\d+), keras='([^']+)', weights_equal=(\w+), loss_fell=(\w+)\)", ran.output)
    assert match, ran.output[-3000:]
    assert (match[1], match[3], match[4]) == ("2", "True", "True"), match[0]
    assert match[2].startswith(("keras 2.", "tf_keras 2.")), match[2]  # Horovod's Keras API ran on Keras 2


@pytest.mark.smoke
@pytest.mark.skipif(_keras_major() < 3, reason="Keras 3 is not installed in this environment (Keras 2 is tf.keras)")
def test_a_keras_3_optimizer_is_refused_naming_tf_keras(pyflyte_run):
    ran = pyflyte_run(FLOWS, "keras3_optimizer_wf", timeout=300)
    assert ran.returncode != 0, ran.output[-3000:]
    assert "wrapped a Keras" not in ran.output
    assert "needs Keras 2" in ran.output and "tf-keras" in ran.output and "TF_USE_LEGACY_KERAS=1" in ran.output, \
        ran.output[-3000:]
    assert re.search(r"Horovod rank \d failed on host \S+", ran.output), ran.output[-3000:]
