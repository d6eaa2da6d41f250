"""The synthetic generator: real schema, deterministic, sized by its knobs, with a known noise floor."""

from __future__ import annotations

import csv
import dataclasses
import filecmp
import math
import os

import pandas as pd
import pytest

from rossmann.metrics import rmspe
from rossmann.schema import TABLES, TEST, TRAIN
from rossmann.synthetic import TEST_TRUTH, generate
from rossmann.synthetic_calendar import holiday_calendar
from rossmann.synthetic_weather import TEST_ONLY_EVENT


def _header(path: str) -> list[str]:
    with open(path, newline="") as f:
        return next(csv.reader(f))


def test_same_seed_same_files_other_seed_other_files(tmp_path):
    a = generate(str(tmp_path / "a"), n_stores=6, start="2014-06-01", end="2015-07-31", seed=3)
    b = generate(str(tmp_path / "b"), n_stores=6, start="2014-06-01", end="2015-07-31", seed=3)
    c = generate(str(tmp_path / "c"), n_stores=6, start="2014-06-01", end="2015-07-31", seed=4)
    files = [t.file for t in TABLES] + [TEST_TRUTH]
    match, mismatch, errors = filecmp.cmpfiles(a.out_dir, b.out_dir, files, shallow=False)
    assert (sorted(match), mismatch, errors) == (sorted(files), [], [])
    assert dataclasses.replace(b, out_dir=a.out_dir) == a
    assert not filecmp.cmp(os.path.join(a.out_dir, TRAIN.file), os.path.join(c.out_dir, TRAIN.file), shallow=False)


def test_files_have_the_real_schema(tiny_data):
    assert sorted(os.listdir(tiny_data.out_dir)) == sorted([t.file for t in TABLES] + [TEST_TRUTH])
    for table in TABLES:
        assert _header(os.path.join(tiny_data.out_dir, table.file)) == table.column_names


def test_sizes_follow_the_knobs(tmp_path):
    report = generate(str(tmp_path), n_stores=7, start="2015-01-01", end="2015-03-31", test_days=10)
    train = pd.read_csv(tmp_path / TRAIN.file, dtype={"StateHoliday": str})
    test = pd.read_csv(tmp_path / TEST.file, dtype={"StateHoliday": str})
    store = pd.read_csv(tmp_path / "store.csv")
    assert list(store["Store"]) == list(range(1, 8))
    assert (train["Date"].min(), train["Date"].max()) == ("2015-01-01", "2015-03-31") == report.train_window
    assert sorted(test["Date"].unique()) == [f"2015-04-{d:02d}" for d in range(1, 11)]
    assert report.test_window == ("2015-04-01", "2015-04-10")
    assert len(test) == report.test_rows == 7 * 10 and list(test["Id"]) == list(range(1, 71))
    # Every store but the one that opens in the test period has a row on every train day.
    assert len(train) == report.train_rows == 6 * 90
    assert set(train["Store"]) == set(range(1, 7)) and report.test_only_store == 7


def test_real_data_quirks_are_reproduced(small_data):
    out = small_data.out_dir
    with open(os.path.join(out, TRAIN.file)) as f:
        holidays = [line.rstrip("\n").split(",")[7] for line in f][1:]
    assert {'0', '"0"', "a", "b", "c"} <= set(holidays)  # 0 and "0" mixed, plus the three holiday kinds
    store = pd.read_csv(os.path.join(out, "store.csv"))
    assert store["CompetitionDistance"].isna().sum() >= 1
    assert set(store["PromoInterval"].dropna()) <= {"Jan,Apr,Jul,Oct", "Feb,May,Aug,Nov", "Mar,Jun,Sept,Dec"}
    test = pd.read_csv(os.path.join(out, TEST.file))
    assert test["Open"].isna().sum() > 0
    train = pd.read_csv(os.path.join(out, TRAIN.file), dtype={"StateHoliday": str})
    assert ((train["Open"] == 0) & (train["Sales"] == 0)).sum() > 0
    assert ((train["Open"] == 0) & (train["Sales"] != 0)).sum() == 0
    states = pd.read_csv(os.path.join(out, "store_states.csv"))
    names = pd.read_csv(os.path.join(out, "state_names.csv"))
    assert "HB,NI" in set(names["State"]) and "Niedersachsen" in set(names["StateName"])
    trend = pd.read_csv(os.path.join(out, "googletrend.csv"))
    assert "Rossmann_DE_NI" in set(trend["file"]) and "Rossmann_DE" in set(trend["file"])
    assert set(states["State"]) <= set(names["State"])
    # Test-only values: a store with no train rows, and a weather event only in the test period.
    assert small_data.test_only_store not in set(train["Store"]) and small_data.test_only_store in set(test["Store"])
    weather = pd.read_csv(os.path.join(out, "weather.csv"))
    event_days = weather.loc[weather["Events"] == TEST_ONLY_EVENT, "Date"]
    assert len(event_days) == 1 and event_days.iloc[0] >= small_data.test_window[0]


@pytest.mark.parametrize("sigma", [0.1, 0.2])
def test_noise_floor_matches_the_noise(tmp_path, sigma):
    report = generate(str(tmp_path), n_stores=60, noise_sigma=sigma)
    expected = math.sqrt(1 - math.exp(-sigma ** 2))
    assert report.expected_noise_floor_rmspe == pytest.approx(expected)
    assert report.backtest_rows > 1500
    assert report.backtest_noise_floor_rmspe == pytest.approx(expected, rel=0.1)
    assert report.test_noise_floor_rmspe == pytest.approx(expected, rel=0.1)
    assert report.backtest_noise_floor_rmspe < report.backtest_noise_floor_rmspe_median  # exp(signal) is not optimal


def test_test_truth_scores_the_perfect_model_on_every_open_test_day(small_data):
    truth = pd.read_csv(os.path.join(small_data.out_dir, TEST_TRUTH))
    test = pd.read_csv(os.path.join(small_data.out_dir, TEST.file))
    assert list(truth.columns) == ["Id", "Sales", "PerfectSales"] and sorted(truth["Id"]) == sorted(test["Id"])
    rows = truth.merge(test, on="Id")
    assert (rows.loc[rows["Open"] == 0, "Sales"] == 0).all() and (rows.loc[rows["Open"] == 1, "Sales"] > 0).all()
    scored = rows[rows["Sales"] > 0]
    assert rmspe(scored["Sales"], scored["PerfectSales"]) == pytest.approx(small_data.test_noise_floor_rmspe, rel=1e-3)


def test_holidays_after_the_data_still_count_for_its_last_days():
    """The generator's calendar reaches past the files: sales rise before a holiday that test.csv does not show."""
    dates = pd.date_range("2015-09-01", "2015-10-01")
    holiday, _, days_to_holiday, _, _ = holiday_calendar(dates, ["BY"])
    assert holiday[0, -1] == 0 and days_to_holiday[0, -1] == 2  # German Unity Day, 3 October, is after the data
