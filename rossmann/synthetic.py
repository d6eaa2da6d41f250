"""A synthetic Rossmann dataset: the seven input files with the real schema and a known, learnable signal.

Sales on an open day are `exp(log_signal) * exp(eps)`, eps ~ N(0, sigma^2), rounded to whole euros, where
`log_signal` adds up: store level (+ store type and assortment), day of week (global + per store), promo
(per-store lift), school holiday and the first days after one (back to school), the days just before and
after a state holiday, open state holidays, seasonality and Christmas, a slow growth, competition (distance x
months open, some opening mid-series), Promo2 months, weather (mean temperature and Events) and the
state's Google trend. Holidays are counted on a calendar that reaches past both ends of the data, so near
the end of the test period sales rise before holidays the files do not show, as real sales do. The noise
floors reported are what a perfect model, one that knows `log_signal`, reaches on the backtest window (the
last `test_days` days of train.csv) and on the test period; `test_truth.csv` holds the test period's true
sales and that perfect model's prediction per Id (the loader never reads it).

Quirks of the real files are reproduced: StateHoliday mixes 0 and "0" (quoted) and a/b/c; a few stores
lack CompetitionDistance; a sixth of the stores have no rows from 2014-07-01 to 2014-12-31 (as in the
real train.csv); a few rows are open with zero sales; a few test rows have an empty Open; store "HB,NI"
is "NI" in googletrend.csv. Values only in the test period (so vocabularies must include test.csv): the
last store opens on the first test day (no train rows), and one weather event ("Rain-Hail-Thunderstorm")
occurs only on a test day. The calendar is `rossmann.synthetic_calendar`'s, the weather and Google trends
`rossmann.synthetic_weather`'s.
"""

from __future__ import annotations

import csv
import datetime as dt
import logging
import os
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from rossmann.schema import GOOGLETREND, STATE_NAMES, STORE, STORE_STATES, TEST, TRAIN, WEATHER
from rossmann.synthetic_calendar import holiday_calendar, season
from rossmann.synthetic_weather import OTHER_STATES, STORE_STATES_INFO, TEST_ONLY_EVENT, trends_csv, weather_csv

log = logging.getLogger(__name__)

PROMO_INTERVALS = {"Jan,Apr,Jul,Oct": (1, 4, 7, 10), "Feb,May,Aug,Nov": (2, 5, 8, 11),
                   "Mar,Jun,Sept,Dec": (3, 6, 9, 12)}
DOW_EFFECT = np.array([0.18, 0.05, 0.0, 0.0, 0.05, -0.05, 0.20])  # Monday .. Sunday
GAP = (dt.date(2014, 7, 1), dt.date(2014, 12, 31))  # rows missing for a sixth of the stores, as in the real data
TEST_DAYS = 48  # the Kaggle test period's length: 2015-08-01..2015-09-17
TEST_TRUTH = "test_truth.csv"  # Id, Sales, PerfectSales of the test period, next to the files the loader reads


@dataclass(frozen=True)
class SyntheticReport:
    """What was generated, and the best RMSPE any model can get on the backtest window and the test period.

    backtest_noise_floor_rmspe: empirical RMSPE of the RMSPE-optimal point prediction exp(log_signal -
    1.5 sigma^2) on the backtest window's open days with Sales > 0; backtest_noise_floor_rmspe_median: the
    same for exp(log_signal); test_noise_floor_rmspe: the first on the test period's open days with Sales > 0;
    expected_noise_floor_rmspe: the theoretical optimum sqrt(1 - exp(-sigma^2)).
    """

    out_dir: str
    seed: int
    n_stores: int
    train_window: tuple[str, str]
    test_window: tuple[str, str]
    backtest_window: tuple[str, str]
    train_rows: int
    test_rows: int
    backtest_rows: int
    noise_sigma: float
    backtest_noise_floor_rmspe: float
    backtest_noise_floor_rmspe_median: float
    test_noise_floor_rmspe: float
    expected_noise_floor_rmspe: float
    test_only_store: int
    test_only_event: str


@dataclass
class _Grid:
    """Everything on the (store, day) grid that the CSV writers need."""

    dates: pd.DatetimeIndex
    n_train: int
    dow: np.ndarray        # (D,) Monday = 0
    promo: np.ndarray      # (D,)
    holiday: np.ndarray    # (S, D) 0 / a / b / c as 0..3
    school: np.ndarray     # (S, D)
    open_: np.ndarray      # (S, D)
    present: np.ndarray    # (S, D) the row exists in train.csv / test.csv
    sales: np.ndarray      # (S, D)
    customers: np.ndarray  # (S, D)
    perfect: np.ndarray    # (S, D) the RMSPE-optimal prediction exp(log_signal - 1.5 sigma^2)

    @cached_property
    def date_str(self) -> np.ndarray:
        return self.dates.strftime("%Y-%m-%d").to_numpy()


def generate(out_dir: str, n_stores: int = 1115, start: str = "2013-01-01", end: str = "2015-07-31",
             test_days: int = TEST_DAYS, seed: int = 0, noise_sigma: float = 0.1) -> SyntheticReport:
    """Write train.csv, test.csv, store.csv, store_states.csv, state_names.csv, googletrend.csv and
    weather.csv to `out_dir`, deterministic from `seed`. The test period is the `test_days` days after `end`."""
    if n_stores < 2 or test_days < 1:
        raise ValueError("need n_stores >= 2 and test_days >= 1")
    rng = np.random.default_rng(seed)
    n_train = len(pd.date_range(start, end, freq="D"))
    if n_train <= test_days:
        raise ValueError(f"train dates {start}..{end} must span more than the {test_days} test days (the backtest)")
    dates = pd.date_range(start, periods=n_train + test_days, freq="D")
    stores = _stores(rng, n_stores, dates[-1].year)
    st = stores["State"].map({s: i for i, s in enumerate(STORE_STATES_INFO)}).to_numpy()
    holiday, school, before_hol, after_hol, after_school = holiday_calendar(dates, list(STORE_STATES_INFO))
    test_event = (STORE_STATES_INFO[stores.loc[0, "State"]][0], min(n_train + 2, len(dates) - 1))
    weather, temp, events_eff = weather_csv(rng, dates, test_event)
    trends, trend_by_state, trend_de = trends_csv(rng, dates)

    # Log-signal on the (store, day) grid.
    dow = dates.dayofweek.to_numpy()
    promo = ((((dates - dates[0]).days.to_numpy() + dow[0]) // 7) % 2 == 0) & (dow < 5)
    hol = holiday[st]
    sig = (stores["base"].to_numpy()[:, None]
           + DOW_EFFECT[dow][None, :] + stores[[f"dow{i}" for i in range(7)]].to_numpy()[:, dow]
           + stores["promo_lift"].to_numpy()[:, None] * promo[None, :]
           + 0.04 * school[st] + 0.06 * np.exp(-(after_school[st] - 1.0) / 2.0) * (after_school[st] >= 1)
           + 0.20 * np.exp(-(before_hol[st] - 1.0)) * (before_hol[st] >= 1)
           + 0.12 * np.exp(-(after_hol[st] - 1.0)) * (after_hol[st] >= 1)
           + 0.10 * (hol > 0)
           + season(dates)[None, :]
           + _competition(stores, dates) + _promo2(stores, dates)
           - 0.008 * (temp[st] - 10.0) + events_eff[st]
           + 0.005 * (trend_by_state[st] - 60.0) + 0.002 * (trend_de[None, :] - 60.0))

    open_, present = _opening(rng, stores, dates, dow, hol, n_train)
    eps = rng.normal(0.0, noise_sigma, size=sig.shape)
    sales = np.where(open_, np.round(np.exp(sig + eps)), 0.0)
    zero_sales = open_ & (rng.random(sig.shape) < 5e-5)  # open, but no sales (as in the real data)
    zero_sales[:, n_train:] = False
    sales[zero_sales] = 0.0
    customers = np.where(sales > 0, np.round(sales / stores["basket"].to_numpy()[:, None]
                                             * np.exp(rng.normal(0, 0.05, sig.shape))), 0.0)

    perfect = np.exp(sig - 1.5 * noise_sigma ** 2)
    scored = present & open_ & (sales > 0)
    backtest, test = scored.copy(), scored.copy()
    backtest[:, np.r_[:n_train - test_days, n_train:len(dates)]] = False
    test[:, :n_train] = False
    grid = _Grid(dates, n_train, dow, promo, hol, school[st], open_, present, sales, customers, perfect)
    os.makedirs(out_dir, exist_ok=True)
    train_rows = _write_train(rng, out_dir, grid)
    test_rows = _write_test(out_dir, grid)
    _write_small_tables(out_dir, stores, weather, trends)
    ds = grid.date_str
    report = SyntheticReport(
        out_dir=out_dir, seed=seed, n_stores=n_stores,
        train_window=(ds[0], ds[n_train - 1]), test_window=(ds[n_train], ds[-1]),
        backtest_window=(ds[n_train - test_days], ds[n_train - 1]),
        train_rows=train_rows, test_rows=test_rows, backtest_rows=int(backtest.sum()), noise_sigma=noise_sigma,
        backtest_noise_floor_rmspe=_rmspe(sales[backtest], perfect[backtest]),
        backtest_noise_floor_rmspe_median=_rmspe(sales[backtest], np.exp(sig[backtest])),
        test_noise_floor_rmspe=_rmspe(sales[test], perfect[test]),
        expected_noise_floor_rmspe=float(np.sqrt(1.0 - np.exp(-noise_sigma ** 2))),
        test_only_store=n_stores, test_only_event=TEST_ONLY_EVENT)
    log.info("synthetic Rossmann data in %s: %d train rows, %d test rows, noise floor RMSPE %.4f (backtest) "
             "and %.4f (test)", out_dir, train_rows, test_rows, report.backtest_noise_floor_rmspe,
             report.test_noise_floor_rmspe)
    return report


def _rmspe(actual: np.ndarray, predicted: np.ndarray) -> float:
    return float(np.sqrt(np.mean(((actual - predicted) / actual) ** 2))) if actual.size else float("nan")


def _stores(rng: np.random.Generator, n: int, last_year: int) -> pd.DataFrame:
    """store.csv columns, the state, and each store's hidden effects."""
    codes = list(STORE_STATES_INFO)
    share = np.array([v[1] for v in STORE_STATES_INFO.values()])
    s = pd.DataFrame({"Store": np.arange(1, n + 1)})
    s["State"] = rng.choice(codes, size=n, p=share / share.sum())
    s["StoreType"] = rng.choice(list("adcb"), size=n, p=[0.54, 0.31, 0.135, 0.015])
    s["Assortment"] = np.where(s["StoreType"] == "b", rng.choice(list("abc"), size=n, p=[0.4, 0.5, 0.1]),
                               rng.choice(list("ac"), size=n, p=[0.53, 0.47]))
    dist = np.round(np.exp(rng.normal(np.log(2300), 1.2, n)) / 10) * 10
    dist[rng.choice(n, size=max(1, round(3 * n / 1115)), replace=False)] = np.nan
    s["CompetitionDistance"] = pd.array(np.clip(dist, 20, 76000), dtype="Int64")
    known = rng.random(n) < 0.68
    year = rng.integers(1995, last_year + 1, n)
    s["CompetitionOpenSinceMonth"] = pd.array(np.where(known, rng.integers(1, 13, n), np.nan), dtype="Int64")
    s["CompetitionOpenSinceYear"] = pd.array(np.where(known, year, np.nan), dtype="Int64")
    p2 = rng.random(n) < 0.51
    s["Promo2"] = p2.astype(int)
    s["Promo2SinceWeek"] = pd.array(np.where(p2, rng.integers(1, 51, n), np.nan), dtype="Int64")
    s["Promo2SinceYear"] = pd.array(np.where(p2, rng.integers(2009, last_year + 1, n), np.nan), dtype="Int64")
    s["PromoInterval"] = np.where(p2, rng.choice(list(PROMO_INTERVALS), size=n, p=[0.58, 0.23, 0.19]), None)
    # Hidden effects.
    s["base"] = (np.log(5500) + rng.normal(0, 0.35, n) + s["StoreType"].map({"a": 0, "b": 0.4, "c": 0, "d": 0.05})
                 + s["Assortment"].map({"a": 0, "b": 0.1, "c": 0.08}))
    for i in range(7):
        s[f"dow{i}"] = rng.normal(0, 0.04, n)
    s["promo_lift"] = rng.normal(0.25, 0.06, n)
    s["basket"] = rng.uniform(7, 12, n)
    s["sunday_open"] = rng.random(n) < 0.03
    s["gap"] = rng.random(n) < 180 / 1115
    return s


def _competition(stores: pd.DataFrame, dates: pd.DatetimeIndex) -> np.ndarray:
    """Competition lowers sales by up to 20%, more when close, ramping up over its first 24 months."""
    dist = stores["CompetitionDistance"].astype("float64").to_numpy()
    strength = np.where(np.isnan(dist), 0.0, -0.2 * np.exp(-np.nan_to_num(dist) / 2000.0))
    year = stores["CompetitionOpenSinceYear"].astype("float64").to_numpy()
    month = stores["CompetitionOpenSinceMonth"].astype("float64").fillna(1).to_numpy()
    known = ~np.isnan(year)
    since = pd.to_datetime(pd.DataFrame({"year": np.where(known, year, 1900), "month": month, "day": 15}))
    days = (dates.to_numpy()[None, :] - since.to_numpy()[:, None]) / np.timedelta64(1, "D")
    months = np.clip(days, 0, 720) // 30
    return strength[:, None] * np.where(known[:, None], months / 24.0, 1.0)


def _promo2(stores: pd.DataFrame, dates: pd.DatetimeIndex) -> np.ndarray:
    """+6% in a Promo2 store's interval months, once its Promo2 has started."""
    year = stores["Promo2SinceYear"].astype("float64").fillna(2100).to_numpy()
    week = stores["Promo2SinceWeek"].astype("float64").fillna(1).to_numpy()
    since = (pd.to_datetime(pd.DataFrame({"year": year, "month": 1, "day": 1}))
             + pd.to_timedelta((week - 1) * 7, unit="D"))
    started = dates.to_numpy()[None, :] >= since.to_numpy()[:, None]
    month_on = np.zeros((len(stores), 13), dtype=bool)
    for i, interval in enumerate(stores["PromoInterval"]):
        month_on[i, list(PROMO_INTERVALS.get(interval, ()))] = True
    return 0.06 * (started & month_on[:, dates.month.to_numpy()])


def _opening(rng: np.random.Generator, stores: pd.DataFrame, dates: pd.DatetimeIndex, dow: np.ndarray,
             hol: np.ndarray, n_train: int) -> tuple[np.ndarray, np.ndarray]:
    """(open, row present) on the (store, day) grid."""
    n, nd = hol.shape
    sunday_open = stores["sunday_open"].to_numpy()[:, None]
    open_ = ((dow[None, :] != 6) | sunday_open) & ((hol == 0) | (sunday_open & (hol == 1)))
    for s in range(n):  # refurbishments: a few closed spells per store
        for _ in range(rng.poisson(0.8)):
            k = int(rng.integers(0, nd))
            open_[s, k:k + int(rng.integers(3, 30))] = False
    present = np.ones((n, nd), dtype=bool)
    in_gap = np.asarray((dates >= pd.Timestamp(GAP[0])) & (dates <= pd.Timestamp(GAP[1])))
    present[stores["gap"].to_numpy()[:, None] & in_gap[None, :]] = False
    new_store = n - 1  # the last store opens on the first test day
    present[new_store, :n_train] = False
    open_[new_store, n_train:] = (dow[n_train:] != 6) & (hol[new_store, n_train:] == 0)
    return open_, present


def _write_train(rng: np.random.Generator, out_dir: str, g: _Grid) -> int:
    """train.csv, Date descending then Store ascending, as the real file."""
    rows, store = np.nonzero(g.present[:, :g.n_train].T[::-1])
    day = g.n_train - 1 - rows
    code = np.array(["0", "a", "b", "c"])[g.holiday[store, day]]
    quoted = (code == "0") & (rng.random(code.size) < 0.3)  # the real file mixes 0 and "0"
    frame = pd.DataFrame({
        "Store": store + 1, "DayOfWeek": g.dow[day] + 1, "Date": g.date_str[day],
        "Sales": g.sales[store, day].astype(np.int64), "Customers": g.customers[store, day].astype(np.int64),
        "Open": g.open_[store, day].astype(int), "Promo": g.promo[day].astype(int),
        "StateHoliday": np.where(quoted, '"0"', code), "SchoolHoliday": g.school[store, day],
    })
    frame[TRAIN.column_names].to_csv(os.path.join(out_dir, TRAIN.file), index=False, quoting=csv.QUOTE_NONE)
    return len(frame)


def _write_test(out_dir: str, g: _Grid) -> int:
    """test.csv: every store on every test day, Id 1.. in Date descending then Store ascending order."""
    n_stores, n_days = g.open_.shape
    rows, store = np.nonzero(np.ones((n_days - g.n_train, n_stores), dtype=bool))
    day = n_days - 1 - rows
    is_open = g.open_[store, day].astype(int).astype(object)
    is_open[np.flatnonzero((store == 0) & (is_open == 1))[-5:]] = ""  # store 1: a few open days with empty Open
    frame = pd.DataFrame({
        "Id": np.arange(1, len(day) + 1), "Store": store + 1, "DayOfWeek": g.dow[day] + 1, "Date": g.date_str[day],
        "Open": is_open, "Promo": g.promo[day].astype(int),
        "StateHoliday": np.array(["0", "a", "b", "c"])[g.holiday[store, day]], "SchoolHoliday": g.school[store, day],
    })
    frame[TEST.column_names].to_csv(os.path.join(out_dir, TEST.file), index=False)
    truth = pd.DataFrame({"Id": frame["Id"], "Sales": g.sales[store, day].astype(np.int64),
                          "PerfectSales": np.where(g.open_[store, day], g.perfect[store, day], 0.0)})
    truth.to_csv(os.path.join(out_dir, TEST_TRUTH), index=False, float_format="%.2f")
    return len(frame)


def _write_small_tables(out_dir: str, stores: pd.DataFrame, weather: pd.DataFrame, trends: pd.DataFrame) -> None:
    stores[STORE.column_names].to_csv(os.path.join(out_dir, STORE.file), index=False)
    stores[STORE_STATES.column_names].to_csv(os.path.join(out_dir, STORE_STATES.file), index=False)
    names = [(v[0], code) for code, v in STORE_STATES_INFO.items()] + [(v[0], c) for c, v in OTHER_STATES.items()]
    pd.DataFrame(sorted(names), columns=STATE_NAMES.column_names).to_csv(
        os.path.join(out_dir, STATE_NAMES.file), index=False)
    trends[GOOGLETREND.column_names].to_csv(os.path.join(out_dir, GOOGLETREND.file), index=False)
    weather[WEATHER.column_names].to_csv(os.path.join(out_dir, WEATHER.file), index=False, float_format="%.2f")
