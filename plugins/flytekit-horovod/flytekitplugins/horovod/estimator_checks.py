"""Horovod's Estimator checks of columns against the model, run before the fit starts and saying what to change.

Horovod (0.28.1) compares the feature and label columns with the model's inputs, outputs and ``label_shapes`` only
after ``fit`` has written the DataFrame to the store (a Spark job) and read its metadata (``common/util.py``,
``check_shape_compatibility``), and says what is wrong, not what to do. The counts need no data: here each
Estimator's own ``_check_metadata_compatibility`` runs first on metadata without sizes (Horovod skips a column whose
size is unknown), and its error gets the change that fixes it. The per-column size checks still run after the write.

The Estimators' default data module where petastorm does not import (``InMemoryDataModule``) is switched by the patch
series (patches/0011), not here, because a Horovod built by ``horovod_flyte_runtime.build`` must train for users who
never import this plugin, and importing the plugin should change no Horovod default.
"""

import functools
import re
from typing import Any, Callable

from horovod.spark.common.estimator import HorovodEstimator
from horovod_flyte_runtime.settings import HorovodConfigError

_COUNTS = re.compile(r"(Feature|Label) column count (\d+) must equal (model inputs|model outputs|provided label shapes) "
                     r"count (\d+)")


def _advice(estimator: Any, kind: str, columns: int, target: str, targets: int) -> str:
    torch = hasattr(estimator, "getInputShapes")
    if kind == "Feature":
        model_side = ("input_shapes= one shape per feature column" if torch
                      else "the model one keras.Input per feature column")
        return (f"pass feature_cols= one column per model input ({targets}, in the order of the model's inputs; "
                f"several values for one input go in one array column, e.g. pyspark.sql.functions.array), or give "
                f"{model_side}")
    if target == "model outputs":
        return f"pass label_cols= one column per model output ({targets}), or give the model one output per label column"
    return f"pass label_shapes= one shape per label column ({columns}), or leave label_shapes unset"


def check_columns(estimator: Any) -> None:
    """``HorovodConfigError`` naming the change where the column counts cannot match the model."""
    if estimator.getModel() is None:  # Horovod's own check names it
        return
    columns = [*estimator.getFeatureCols(), *estimator.getLabelCols()]
    try:
        estimator._check_metadata_compatibility({col: {"shape": None} for col in columns})
    except ValueError as error:
        found = _COUNTS.search(str(error))
        if found is None:
            raise
        kind, count, target, targets = found.group(1), int(found.group(2)), found.group(3), int(found.group(4))
        raise HorovodConfigError(f"{type(estimator).__name__}: {error}: "
                                 f"{_advice(estimator, kind, count, target, targets)}") from None


def _checked(fit: Callable) -> Callable:
    @functools.wraps(fit)
    def checked_fit(self, *args: Any, **kwargs: Any) -> Any:
        check_columns(self)
        return fit(self, *args, **kwargs)

    return checked_fit


HorovodEstimator.fit = _checked(HorovodEstimator.fit)
HorovodEstimator.fit_on_parquet = _checked(HorovodEstimator.fit_on_parquet)
