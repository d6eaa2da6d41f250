"""Calendar helpers of the feature pipeline."""

from __future__ import annotations

import csv
import datetime as dt


def backtest_window(train_end: dt.date, test_window: tuple[dt.date, dt.date]) -> tuple[dt.date, dt.date]:
    """The last days of the training data, as many as the test period has, both ends inclusive."""
    days = (test_window[1] - test_window[0]).days
    return train_end - dt.timedelta(days=days), train_end


def date_range(path: str, column: str = "Date") -> tuple[str, str] | None:
    """The earliest and latest YYYY-MM-DD values of `column` in the CSV file `path` (one streaming pass, no Spark),
    or None if it has none; other values are skipped (the typed read reports them)."""
    low = high = ""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        index = [h.strip() for h in next(reader, [])].index(column)
        for row in reader:
            value = row[index].strip() if index < len(row) else ""
            if (not low or value < low or value > high) and _is_date(value):
                low, high = min(low or value, value), max(high, value)
    return (low, high) if low else None


def _is_date(value: str) -> bool:
    try:
        return len(value) == 10 and dt.date.fromisoformat(value) is not None
    except ValueError:
        return False
