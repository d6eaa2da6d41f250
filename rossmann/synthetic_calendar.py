"""The synthetic data's calendar: German state holidays (Easter's included) and school holidays per state and day,
counted on a calendar that reaches CALENDAR_MARGIN days past both ends of the data, and the season's effect."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

CALENDAR_MARGIN = 90  # days of holiday calendar before and after the data, which still shape sales near its ends


def easter(year: int) -> dt.date:
    """Gregorian Easter Sunday (anonymous algorithm)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    l_ = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * l_) // 451
    month, day = divmod(h + l_ - 7 * m + 114, 31)
    return dt.date(year, month, day + 1)


def state_holidays(year: int, state: str) -> dict[dt.date, int]:
    """State holidays of one state and year: 1 = public ('a'), 2 = Easter ('b'), 3 = Christmas ('c')."""
    e = easter(year)
    days = {dt.date(year, 1, 1): 1, dt.date(year, 5, 1): 1, dt.date(year, 10, 3): 1, dt.date(year, 12, 25): 3,
            dt.date(year, 12, 26): 3, e - dt.timedelta(2): 2, e + dt.timedelta(1): 2, e + dt.timedelta(39): 1,
            e + dt.timedelta(50): 1}
    regional = {(1, 6): "BW BY ST", (8, 15): "BY", (10, 31): "SN ST TH", (11, 1): "BW BY NW RP"}
    for (month, day), where in regional.items():
        if state in where.split():
            days[dt.date(year, month, day)] = 1
    if state in ("BW", "BY", "HE", "NW", "RP"):
        days[e + dt.timedelta(60)] = 1  # Corpus Christi
    if state == "SN":
        nov22 = dt.date(year, 11, 22)
        days[nov22 - dt.timedelta((nov22.weekday() - 2) % 7)] = 1  # Repentance Day: Wednesday before 23 Nov
    return days


def holiday_calendar(dates: pd.DatetimeIndex, states: list[str]) -> tuple[np.ndarray, ...]:
    """Per (state, day of `dates`): holiday code, school holiday flag, days to the next and since the last
    state holiday, and days since the last school holiday day, counted on a calendar that reaches
    CALENDAR_MARGIN days beyond both ends (the flags of those days are in no file)."""
    margin = pd.Timedelta(days=CALENDAR_MARGIN)
    days = pd.date_range(dates[0] - margin, dates[-1] + margin, freq="D")
    n_st, n_d = len(states), len(days)
    holiday = np.zeros((n_st, n_d), dtype=np.int8)
    school = np.zeros((n_st, n_d), dtype=np.int8)
    d0 = days[0].date()
    years = range(days[0].year - 1, days[-1].year + 2)
    srng = np.random.default_rng(1234)  # the school calendar is the same for every seed, like real calendars
    for i, state in enumerate(states):
        for year in years:
            for day, code in state_holidays(year, state).items():
                k = (day - d0).days
                if 0 <= k < n_d:
                    holiday[i, k] = code
            e = easter(year)
            summer = dt.date(year, 6, 22) + dt.timedelta(int(srng.integers(0, 50)))  # some run past mid-September
            autumn = dt.date(year, 10, 1) + dt.timedelta(int(srng.integers(0, 25)))
            shift = int(srng.integers(-2, 3))
            for first, length in ((dt.date(year, 12, 21 + shift), 16), (e - dt.timedelta(8 - shift), 15),
                                  (summer, 43), (autumn, int(srng.integers(7, 15)))):
                k0 = (first - d0).days
                school[i, max(k0, 0):max(k0 + length, 0)] = 1
    idx = np.arange(n_d)

    def since(flags: np.ndarray) -> np.ndarray:
        return idx - np.maximum.accumulate(np.where(flags, idx, -10_000), axis=1)

    def until(flags: np.ndarray) -> np.ndarray:
        return np.minimum.accumulate(np.where(flags, idx, 10_000)[:, ::-1], axis=1)[:, ::-1] - idx

    inner = slice(CALENDAR_MARGIN, CALENDAR_MARGIN + len(dates))
    return (holiday[:, inner], school[:, inner], until(holiday > 0)[:, inner], since(holiday > 0)[:, inner],
            since(school > 0)[:, inner])


def season(dates: pd.DatetimeIndex) -> np.ndarray:
    """The log-sales effect of each day's date: a yearly wave, the weeks before Christmas, and a slow growth."""
    doy = dates.dayofyear.to_numpy()
    years = (dates - dates[0]).days.to_numpy() / 365.25
    dec = dates.month.to_numpy() == 12
    dom = dates.day.to_numpy()
    xmas = np.where(dec & (dom <= 24), 0.4 * np.exp(-(24 - dom) / 5.0), 0.0) + np.where(dec & (dom >= 27), 0.1, 0.0)
    return 0.06 * np.sin(2 * np.pi * (doy - 80) / 365.25) + 0.04 * years + xmas
