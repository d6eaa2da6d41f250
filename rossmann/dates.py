"""Calendar helpers of the feature pipeline."""

from __future__ import annotations

import datetime as dt


def backtest_window(train_end: dt.date, test_window: tuple[dt.date, dt.date]) -> tuple[dt.date, dt.date]:
    """The last days of the training data, as many as the test period has, both ends inclusive."""
    days = (test_window[1] - test_window[0]).days
    return train_end - dt.timedelta(days=days), train_end
