"""Hyperparameters are checked when the workflow starts: names, types and ranges, each error naming the setting."""

import dataclasses
import json

import click
import pytest
from flytekit import FlyteContextManager
from flytekit.core.type_engine import TypeEngine

from workflows.rossmann import Hyperparameters


def test_defaults_are_valid_and_json_is_what_pyflyte_builds_with():
    assert Hyperparameters.from_json("{}") == Hyperparameters()
    hp = Hyperparameters.from_json('{"epochs": 3, "learning_rate": 1, "hidden": [64]}')
    assert (hp.epochs, hp.learning_rate, hp.hidden) == (3, 1.0, [64])
    assert isinstance(hp.learning_rate, float)  # JSON's 1 is a valid learning rate, kept as a float


@pytest.mark.parametrize("given, message", [
    ({"epoch": 3}, "unknown hyperparameter 'epoch': did you mean 'epochs'?"),
    ({"batchsize": 3}, "did you mean 'batch_size'?"),
    ({"colour": "red"}, "unknown hyperparameter 'colour': (known: epochs, batch_size, learning_rate"),
    ({"ranks": 3}, "'ranks' is not a hyperparameter: the rank count is the training tasks' config"),
    ({"epochs": "3"}, "epochs='3': must be an integer >= 1"),
    ({"epochs": True}, "epochs=True: must be an integer >= 1"),
    ({"sample_rate": 0}, "sample_rate=0: must be in (0.0, 1.0]"),
    ({"sample_rate": 1.5}, "sample_rate=1.5: must be in (0.0, 1.0]"),
    ({"learning_rate": float("nan")}, "learning_rate=nan: must be in (0.0, inf)"),
    ({"seed": -1}, "seed=-1: must be at least 0"),
    ({"n_stores": 1}, "n_stores=1: must be at least 2"),
    ({"hidden": []}, "hidden=[]: must be a non-empty list of layer widths"),
    ({"hidden": [0]}, "hidden width=0: must be at least 1"),
    ({"start": "2015-02-30"}, "start='2015-02-30': must be a date YYYY-MM-DD"),
    ({"start": "2015-07-01"}, "start=2015-07-01, end=2015-07-31: the range must span at least 96 days"),
])
def test_bad_settings_are_usage_errors_naming_the_setting(given, message):
    with pytest.raises(click.BadParameter) as err:
        Hyperparameters.from_json(json.dumps(given))
    assert message in str(err.value)


def test_values_are_checked_wherever_the_dataclass_is_built():
    """A task's input is rebuilt from its literal, so a bad value never reaches a task body either."""
    with pytest.raises(ValueError, match="epochs=0: must be at least 1"):
        Hyperparameters(epochs=0)
    ctx = FlyteContextManager.current_context()
    literal = TypeEngine.to_literal(ctx, Hyperparameters(epochs=2), Hyperparameters,
                                    TypeEngine.to_literal_type(Hyperparameters))
    assert TypeEngine.to_python_value(ctx, literal, Hyperparameters) == Hyperparameters(epochs=2)
    assert [f.name for f in dataclasses.fields(Hyperparameters)] == [
        "epochs", "batch_size", "learning_rate", "sample_rate", "seed", "n_stores", "start", "end", "hidden"]
