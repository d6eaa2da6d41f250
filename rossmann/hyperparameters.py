"""Training defaults, and checks of run settings: known names, types and ranges, each failure naming the
setting, its value and what is allowed, so that a bad setting stops a run before any data is written.

No ``from __future__ import annotations``: flytekit compares the type of each of ``Hyperparameters``' fields with the
type it reads back from a registered task, and a string annotation never equals it."""

import dataclasses
import datetime as dt
import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any, List

# Defaults for a quick, accurate run (see docs/rossmann.md); the reference example's larger network
# (rossmann.model.build_model's defaults: 1000-1000-1000-500, dropout 0.5) is slower and no better here.
# The batch and rate are per rank (2 ranks: a global batch of 1,024 at 1.2e-2), chosen by recipe runs
# (docs/performance.md section 7): as accurate as the former 256 at 2e-3, in half the steps. The L2 penalty was
# 5e-5 until recipe runs over 5 seeds showed the model under-regularised on the default data (test RMSPE 1.058x the
# perfect model's on average with 30 epochs); 1e-3 to 5e-3 gave 1.037x to 1.040x, and 2e-3 reaches 1.042x in 20
# epochs; at full size 2e-3 gave 1.060x where 5e-5 had given 1.023x, so the penalty falls with the data (l2_penalty).
EPOCHS = 20
BATCH_SIZE = 512
LEARNING_RATE = 6e-3  # per rank
WARMUP_EPOCHS = 2  # the rate rises to its scaled value over these first epochs (rossmann.schedule.half_cosine)
HIDDEN = (256, 128)
DROPOUT = 0.1
# The model's fixed choices, the same in its Keras and its PyTorch form.
L2 = 2e-3  # L2 penalty on the dense layers' kernels up to L2_ROWS training rows (see l2_penalty)
L2_ROWS = 34_209  # the default synthetic data's training rows
CLIP = 4.0  # standard deviations a continuous input may be from its training mean


def l2_penalty(train_rows: int) -> float:
    """The L2 penalty on the dense layers' kernels for a training split of ``train_rows`` rows: ``L2`` up to the
    default data's size, then in proportion to 1 / rows (a prior on the weights, which more data should outweigh;
    the loss is a mean over rows, so a fixed penalty would weigh as much against 23 times the rows): 8.7e-5 at the
    real data's size (1,115 stores, 789,765 rows)."""
    return L2 * min(1.0, L2_ROWS / max(1, train_rows))


class HyperparameterError(ValueError):
    """A setting that is unknown, of the wrong type or out of range."""


def check_names(given: Iterable[str], known: Iterable[str], moved: Mapping[str, str] | None = None) -> None:
    """Every name in `given` must be in `known`; `moved` maps a former setting to where it is set now."""
    known = list(known)
    for name in given:
        if name in known:
            continue
        if moved and name in moved:
            raise HyperparameterError(f"{name!r} is not a hyperparameter: {moved[name]}")
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise HyperparameterError(f"unknown hyperparameter {name!r}: {hint}(known: {', '.join(known)})")


def integer(name: str, value: Any, low: int) -> int:
    """`value` if it is an integer >= low."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise HyperparameterError(f"{name}={value!r}: must be an integer >= {low}")
    if value < low:
        raise HyperparameterError(f"{name}={value}: must be at least {low}")
    return value


def number(name: str, value: Any, low: float, high: float = math.inf, low_inclusive: bool = False) -> float:
    """`value` as a float if it is a finite number in (low, high] (or [low, high] with low_inclusive)."""
    allowed = f"{'[' if low_inclusive else '('}{low}, {high}{']' if high < math.inf else ')'}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HyperparameterError(f"{name}={value!r}: must be a number in {allowed}")
    above = value >= low if low_inclusive else value > low
    if not (above and value <= high and math.isfinite(value)):
        raise HyperparameterError(f"{name}={value}: must be in {allowed}")
    return float(value)


def widths(name: str, value: Any) -> list[int]:
    """`value` if it is a list of layer widths, each an integer >= 1."""
    if not isinstance(value, list) or not value:
        raise HyperparameterError(f"{name}={value!r}: must be a non-empty list of layer widths, e.g. [256, 128]")
    for width in value:
        integer(f"{name} width", width, 1)
    return value


def date_range(start_name: str, start: Any, end_name: str, end: Any, min_days: int) -> tuple[str, str]:
    """(start, end) if both are YYYY-MM-DD dates and the range has at least `min_days` days."""
    days = []
    for name, value in ((start_name, start), (end_name, end)):
        try:
            days.append(dt.date.fromisoformat(value))
        except (TypeError, ValueError):
            raise HyperparameterError(f"{name}={value!r}: must be a date YYYY-MM-DD") from None
    if (days[1] - days[0]).days + 1 < min_days:
        raise HyperparameterError(f"{start_name}={start}, {end_name}={end}: the range must span at least "
                                  f"{min_days} days")
    return start, end


@dataclasses.dataclass
class Hyperparameters:
    """Training and data knobs, checked when made (each failure names the setting). ``learning_rate`` is per rank;
    ``n_stores``/``start``/``end`` size the synthetic data (ignored for real data). The workflows' input (Flyte 1's
    ``workflows/rossmann.py``, Flyte 2's ``workflows/rossmann_flyte2.py``)."""

    epochs: int = EPOCHS
    batch_size: int = BATCH_SIZE
    learning_rate: float = LEARNING_RATE
    sample_rate: float = 1.0
    seed: int = 0
    n_stores: int = 50
    start: str = "2013-01-01"
    end: str = "2015-07-31"
    hidden: List[int] = dataclasses.field(default_factory=lambda: list(HIDDEN))

    def __post_init__(self):
        from rossmann.synthetic import TEST_DAYS

        self.epochs = integer("epochs", self.epochs, 1)
        self.batch_size = integer("batch_size", self.batch_size, 1)
        self.learning_rate = number("learning_rate", self.learning_rate, 0.0)
        self.sample_rate = number("sample_rate", self.sample_rate, 0.0, 1.0)
        self.seed = integer("seed", self.seed, 0)
        self.n_stores = integer("n_stores", self.n_stores, 2)
        self.start, self.end = date_range("start", self.start, "end", self.end, 2 * TEST_DAYS)
        self.hidden = widths("hidden", self.hidden)
