"""``Horovod(framework="auto")``, the default: each rank initialises the framework the body's code names, so a PyTorch
body never starts TensorFlow, also when its training loop is in a module of the user's beside it."""


import horovod.torch as module_hvd
import pytest

from flytekitplugins.horovod import Horovod
from horovod_flyte_runtime.body_framework import body_framework
from horovod_flyte_runtime.rank_start import launched_rank
from tests.plugin.flows.torch_loop import Net, fit


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


def _calls_a_loop_of_the_user_s_module():  # the loop imported at the top of this file
    return fit(steps=2)


def _imports_the_loop_inside():
    from tests.plugin.flows.torch_loop import fit as loop

    return loop()


def _builds_a_model_class_of_the_user_s_module():
    return Net()


def _calls_installed_code_and_the_plugin():  # neither the standard library nor the plugin is the user's code
    import json

    return json.dumps(launched_rank())


@pytest.mark.parametrize("body, framework", [(_imports_torch_inside, "pytorch"), (_reads_a_module_global, "pytorch"),
                                             (_calls_a_helper_of_its_file, "pytorch"), (_keras, "tensorflow"),
                                             (_both, None), (_none, None),
                                             (_calls_a_loop_of_the_user_s_module, "pytorch"),
                                             (_imports_the_loop_inside, "pytorch"),
                                             (_builds_a_model_class_of_the_user_s_module, "pytorch"),
                                             (_calls_installed_code_and_the_plugin, None)])
def test_the_framework_is_read_from_the_body(body, framework):
    assert body_framework(body) == framework


def test_a_body_naming_no_single_framework_gets_tensorflow_and_a_warning(caplog):
    assert Horovod().for_body(_none).framework == "tensorflow"
    assert "set Horovod(framework=...) to choose" in caplog.text
    assert Horovod(framework=None).for_body(_imports_torch_inside).framework is None  # a choice is kept


@pytest.mark.parametrize("workflow, result", [("wf", "size=2 tensorflow_imported=False"),
                                              ("loop_wf", "tensorflow_imported=False")])
def test_a_pytorch_body_under_the_default_settings_does_not_start_tensorflow(pyflyte_run, workflow, result):
    """A kfmpi body as it stands, and a body whose loop is in the user's module beside it (issue 37: it initialised
    horovod.tensorflow, loading TensorFlow into a PyTorch job)."""
    ran = pyflyte_run("tests/plugin/flows/kfmpi_torch_flows.py", workflow)
    assert ran.returncode == 0, ran.output[-3000:]
    assert result in ran.output, ran.output[-3000:]
    assert "framework pytorch" in ran.output and "tensorflow/core" not in ran.output
    assert "names no single framework" not in ran.output
