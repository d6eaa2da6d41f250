"""Calendar helpers shared by the synthetic generator and the feature pipeline."""

from __future__ import annotations

import datetime as dt


def one_year_earlier(day: dt.date) -> dt.date:
    """The same calendar day one year earlier (29 February becomes 28 February)."""
    try:
        return day.replace(year=day.year - 1)
    except ValueError:
        return day.replace(year=day.year - 1, day=28)


def validation_window(test_start: dt.date, test_end: dt.date) -> tuple[dt.date, dt.date]:
    """The test period's calendar window one year earlier, both ends inclusive."""
    return one_year_earlier(test_start), one_year_earlier(test_end)
