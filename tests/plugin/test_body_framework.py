"""``Horovod(framework="auto")``, the default: each rank initialises the framework the body's code names, so a PyTorch
body never starts TensorFlow."""


import horovod.torch as module_hvd
import pytest

from flytekitplugins.horovod import Horovod
from flytekitplugins.horovod.executor.body_framework import body_framework


def _imports_torch_inside():
    import horovod.torch as hvd

    hvd.init()


def _reads_a_module_global():
    module_hvd.init()


def _calls_a_helper_of_its_file():
    return _reads_a_module_global()


def _keras():
    from horovod.tensorflow import keras  # noqa: F401


def _both():
    import horovod.tensorflow  # noqa: F401
    import horovod.torch  # noqa: F401


def _none():
    return 1


@pytest.mark.parametrize("body, framework", [(_imports_torch_inside, "pytorch"), (_reads_a_module_global, "pytorch"),
                                             (_calls_a_helper_of_its_file, "pytorch"), (_keras, "tensorflow"),
                                             (_both, None), (_none, None)])
def test_the_framework_is_read_from_the_body(body, framework):
    assert body_framework(body) == framework


def test_a_body_naming_no_single_framework_gets_tensorflow_and_a_warning(caplog):
    assert Horovod().for_body(_none).framework == "tensorflow"
    assert "set Horovod(framework=...) to choose" in caplog.text
    assert Horovod(framework=None).for_body(_imports_torch_inside).framework is None  # a choice is kept


def test_a_kfmpi_pytorch_body_under_the_default_settings_does_not_start_tensorflow(pyflyte_run):
    ran = pyflyte_run("tests/plugin/flows/kfmpi_torch_flows.py", "wf")
    assert ran.returncode == 0, ran.output[-3000:]
    assert "size=2 tensorflow_imported=False" in ran.output, ran.output[-3000:]
    assert "framework pytorch" in ran.output and "tensorflow/core" not in ran.output
