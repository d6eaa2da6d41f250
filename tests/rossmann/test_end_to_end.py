"""Generate, load, prepare: the Parquet + metadata.json contract that training and prediction read."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rossmann.data import load
from rossmann.features import (
    CATEGORICAL_COLS,
    CONTINUOUS_COLS,
    COUNTER_HORIZON,
    EVENT_COLS,
    add_event_counters,
    prepare,
)
from rossmann.prepared import read_split

CATEGORICAL = [
    "Store", "State", "DayOfWeek", "Year", "Month", "Day", "Week", "CompetitionMonthsOpen", "Promo2Weeks",
    "StoreType", "Assortment", "PromoInterval", "CompetitionOpenSinceYear", "Promo2SinceYear", "Events", "Promo",
    "StateHoliday", "SchoolHoliday", "StoreDayOfWeek", "StorePromo",
]
CONTINUOUS = [
    "CompetitionDistance", "Max_TemperatureC", "Mean_TemperatureC", "Min_TemperatureC", "Max_Humidity",
    "Mean_Humidity", "Min_Humidity", "Max_Wind_SpeedKm_h", "Mean_Wind_SpeedKm_h", "CloudCover", "trend", "trend_de",
    "BeforePromo", "AfterPromo", "AfterStateHoliday", "BeforeStateHoliday", "BeforeSchoolHoliday",
    "AfterSchoolHoliday",
]


@pytest.fixture(scope="module")
def prepared_by_spark(spark, small_data, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("prepared") / "out")
    raw = load(spark, small_data.out_dir)
    try:
        metadata = prepare(spark, raw, out, min_row_groups=8)
    finally:
        raw.unpersist()
    return out, metadata


def _dataset(out: str, name: str) -> tuple[pa.Table, int]:
    path = os.path.join(out, name)
    files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".parquet"))
    groups = sum(pq.ParquetFile(f).num_row_groups for f in files)
    return pa.concat_tables([pq.read_table(f) for f in files]), groups


def test_metadata_contract(prepared_by_spark, small_data):
    out, metadata = prepared_by_spark
    with open(os.path.join(out, "metadata.json")) as f:
        assert json.load(f) == metadata
    assert CATEGORICAL_COLS == CATEGORICAL and CONTINUOUS_COLS == CONTINUOUS
    assert set(metadata) == {"categorical_cols", "continuous_cols", "vocab", "embedding_sizes", "max_sales",
                             "label_col", "rows", "backtest_window", "test_window", "untrained"}
    assert metadata["categorical_cols"] == CATEGORICAL and metadata["continuous_cols"] == CONTINUOUS
    assert metadata["label_col"] == "Sales_log"
    assert metadata["embedding_sizes"] == {c: len(metadata["vocab"][c]) + 1 for c in CATEGORICAL}
    assert all(isinstance(v, str) for values in metadata["vocab"].values() for v in values)
    assert metadata["test_window"] == ["2015-08-01", "2015-09-17"]
    assert metadata["backtest_window"] == ["2015-06-14", "2015-07-31"] == list(small_data.backtest_window)
    # Test-only values are in the vocabularies.
    assert str(small_data.test_only_store) in metadata["vocab"]["Store"]
    assert small_data.test_only_event in metadata["vocab"]["Events"]
    # ... and listed as untrained, with nothing else of Store or Events
    assert metadata["untrained"]["Store"] == [str(small_data.test_only_store)]
    assert metadata["untrained"]["Events"] == [small_data.test_only_event]
    assert metadata["vocab"]["DayOfWeek"] == [str(d) for d in range(1, 8)]


def test_parquet_contract(prepared_by_spark, small_data):
    out, metadata = prepared_by_spark
    expected_columns = {
        "train": CATEGORICAL + CONTINUOUS + ["Sales_log", "Sales", "Date"],
        "val": CATEGORICAL + CONTINUOUS + ["Sales_log", "Sales", "Date"],
        "test": CATEGORICAL + CONTINUOUS + ["Id", "Open", "Date"],
    }
    frames = {}
    for name, columns in expected_columns.items():
        table, groups = _dataset(out, name)
        assert groups >= 8, name
        assert table.column_names == columns
        assert table.num_rows == metadata["rows"][name]
        types = {f.name: f.type for f in table.schema}
        assert all(types[c] == pa.int32() for c in CATEGORICAL)
        assert all(types[c] == pa.float32() for c in CONTINUOUS)
        assert types["Date"] == pa.string()
        for col in CATEGORICAL + CONTINUOUS:
            assert table.column(col).null_count == 0, (name, col)
        frame = table.to_pandas()
        for col in CATEGORICAL:
            assert frame[col].between(0, metadata["embedding_sizes"][col] - 1).all(), (name, col)
        frames[name] = frame
    for name in ("train", "val"):
        frame = frames[name]
        assert {str(t) for t in (frame["Sales_log"].dtype, frame["Sales"].dtype)} == {"float32"}
        assert (frame["Sales"] > 0).all()
        assert np.allclose(frame["Sales_log"], np.log(frame["Sales"]), atol=1e-5)
    assert metadata["max_sales"] == max(frames["train"]["Sales"].max(), frames["val"]["Sales"].max())
    start, end = metadata["backtest_window"]
    assert frames["val"]["Date"].between(start, end).all()
    assert not frames["train"]["Date"].between(start, end).any()
    assert len(frames["val"]) == small_data.backtest_rows  # open days with Sales > 0

    test = frames["test"]
    assert {str(test[c].dtype) for c in ("Id", "Open")} == {"int32"}
    ids = pd.read_csv(os.path.join(small_data.out_dir, "test.csv"))["Id"]
    assert sorted(test["Id"]) == sorted(ids)  # every test Id exactly once
    raw_test = pd.read_csv(os.path.join(small_data.out_dir, "test.csv")).set_index("Id")
    open_ = test.set_index("Id")["Open"]
    assert (open_[raw_test["Open"].isna()] == 1).all()  # empty Open is treated as open
    assert (open_[raw_test["Open"] == 0] == 0).all()

    def decoded(frame, col):
        return frame[col].map(lambda i: int(metadata["vocab"][col][i - 1]))

    for frame in frames.values():  # each store's own day of week and promo: the store's number, then the value
        assert (decoded(frame, "StoreDayOfWeek") == decoded(frame, "Store") * 10 + decoded(frame, "DayOfWeek")).all()
        assert (decoded(frame, "StorePromo") == decoded(frame, "Store") * 10 + decoded(frame, "Promo")).all()
    # a store only in test.csv: its crosses are values the model never trained on (so they get the mean embedding)
    new_store = metadata["untrained"]["Store"]
    crosses = {v for v in metadata["vocab"]["StoreDayOfWeek"] if v[:-1] in new_store}
    assert new_store and crosses and crosses <= set(metadata["untrained"]["StoreDayOfWeek"])


def test_counters_are_within_the_store(prepared_by_spark):
    out, metadata = prepared_by_spark
    train, _ = _dataset(out, "train")
    frame = train.to_pandas()
    promo_on = frame["Promo"] == metadata["vocab"]["Promo"].index("1") + 1
    assert (frame.loc[promo_on, ["AfterPromo", "BeforePromo"]] == 0).all().all()
    assert (frame.loc[~promo_on, "AfterPromo"] > 0).all()
    assert frame[["BeforePromo", "AfterPromo"]].max().max() == COUNTER_HORIZON


def test_backtest_rows_are_featured_as_if_the_data_ended_on_the_last_train_day(spark, prepared_by_spark,
                                                                               small_data):
    """Nothing of test.csv leaks into the backtest: its counters are those of train.csv alone."""
    out, metadata = prepared_by_spark
    counters = [f"{side}{col}" for side in ("Before", "After") for col in EVENT_COLS]
    val = read_split(os.path.join(out, "val"), ["Store", "Date", *counters])
    val["Store"] = [int(metadata["vocab"]["Store"][i - 1]) for i in val["Store"]]
    raw = load(spark, small_data.out_dir)
    try:
        alone = add_event_counters(raw.train).filter("Date >= '2015-06-14'").select("Store", "Date", *counters)
        alone = alone.toPandas().astype({"Date": str})
    finally:
        raw.unpersist()
    merged = val.merge(alone, on=["Store", "Date"], suffixes=("", "_alone"))
    assert len(merged) == len(val) > 0
    for col in counters:
        assert (merged[col] == merged[f"{col}_alone"]).all(), col
    last_day = merged[merged["Date"] == "2015-07-31"]
    assert len(last_day) and last_day["BeforeSchoolHoliday"].isin([0, COUNTER_HORIZON]).all()
