"""TensorFlow and torch in one process (issue 35): TensorFlow >= 2.21 makes its LLVM global, and triton's libtriton.so,
which torch imports on the first ``torch.optim`` optimizer, then registers its LLVM options into TensorFlow's and LLVM
aborts the process. The plugin's import hook (``executor/triton_llvm.py``) loads triton with ``RTLD_DEEPBIND``.

Each case runs in a fresh Python, as a task or a rank would. The first test is the upstream bug itself: when it stops
aborting (a TensorFlow or triton release that no longer clashes), the hook can go."""

import subprocess
import sys

import pytest

ADAM_STEP = """
import torch
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
model(torch.ones(2, 4)).sum().backward()
optimizer.step()
print("stepped", float(model.weight.sum()))
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def _has_triton() -> bool:
    import importlib.util

    return importlib.util.find_spec("triton") is not None


@pytest.mark.skipif(not _has_triton(), reason="torch without triton (a CPU-only torch build): nothing clashes")
def test_without_the_plugin_tensorflow_then_an_optimizer_aborts_in_llvm():
    done = _python("import tensorflow\n" + ADAM_STEP)
    assert done.returncode != 0 and "registered more than once" in done.stderr, (done.returncode, done.stderr[-2000:])


@pytest.mark.smoke
@pytest.mark.parametrize("imports", [
    "import tensorflow\nimport flytekitplugins.horovod\n",  # TensorFlow first, as a Keras user's module does
    "import flytekitplugins.horovod\nimport torch\nimport tensorflow\n",
    "import torch\nimport tensorflow\nimport horovod_flyte_runtime\n",  # the runtime alone, as a rank
], ids=["tensorflow-plugin-torch", "plugin-torch-tensorflow", "torch-tensorflow-runtime"])
def test_with_the_plugin_imported_tensorflow_and_a_torch_optimizer_share_a_process(imports):
    done = _python(imports + ADAM_STEP)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stepped" in done.stdout
