"""A small prepared-data directory, written by hand to the contract of ``rossmann.features.prepare`` in seconds and
without Spark (the tests of training and prediction; ``tests/rossmann/test_end_to_end.py`` checks prepare itself).

Log sales are a known function of store, day of week, promo and temperature plus small noise, so a
model can learn them quickly.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

CATEGORICAL = [
    "Store", "State", "DayOfWeek", "Year", "Month", "Day", "Week", "CompetitionMonthsOpen", "Promo2Weeks",
    "StoreType", "Assortment", "PromoInterval", "CompetitionOpenSinceYear", "Promo2SinceYear", "Events",
    "Promo", "StateHoliday", "SchoolHoliday",
]
CONTINUOUS = [
    "CompetitionDistance", "Max_TemperatureC", "Mean_TemperatureC", "Min_TemperatureC", "Max_Humidity",
    "Mean_Humidity", "Min_Humidity", "Max_Wind_SpeedKm_h", "Mean_Wind_SpeedKm_h", "CloudCover", "trend",
    "trend_de", "BeforePromo", "AfterPromo", "AfterStateHoliday", "BeforeStateHoliday", "BeforeSchoolHoliday",
    "AfterSchoolHoliday",
]
FILES_PER_SPLIT = 8
NOISE = 0.03  # standard deviation of the log-sales noise, so the best RMSPE is about 0.03


def _frame(rng: np.random.Generator, stores: int, dates: pd.DatetimeIndex, store_effect: np.ndarray) -> pd.DataFrame:
    store = np.repeat(np.arange(1, stores + 1), len(dates))
    date = np.tile(dates, stores)
    n = len(store)
    pdf = pd.DataFrame({"Store": store, "Date": pd.DatetimeIndex(date).strftime("%Y-%m-%d")})
    dti = pd.DatetimeIndex(date)
    raw = {
        "State": store % 4, "DayOfWeek": dti.dayofweek + 1, "Year": dti.year, "Month": dti.month, "Day": dti.day,
        "Week": dti.isocalendar().week.to_numpy(), "CompetitionMonthsOpen": rng.integers(0, 25, n),
        "Promo2Weeks": rng.integers(0, 26, n), "StoreType": store % 3, "Assortment": store % 2,
        "PromoInterval": store % 3, "CompetitionOpenSinceYear": 2000 + store % 10, "Promo2SinceYear": 2009 + store % 5,
        "Events": rng.integers(0, 5, n), "Promo": (dti.day // 7) % 2, "StateHoliday": (rng.random(n) < 0.03) * 1,
        "SchoolHoliday": (rng.random(n) < 0.2) * 1,
    }
    for col, values in raw.items():
        pdf[col] = np.asarray(values)
    for col in CONTINUOUS:
        pdf[col] = rng.normal(0, 1, n).astype(np.float32)
    pdf["CompetitionDistance"] = (1 + 50 * store % 17) * 300.0
    pdf["Mean_TemperatureC"] = (10 + 10 * np.sin(dti.dayofyear / 58) + rng.normal(0, 2, n)).astype(np.float32)
    pdf["trend"] = rng.uniform(40, 100, n).astype(np.float32)
    dow_effect = np.array([0.1, 0.0, -0.05, 0.0, 0.05, 0.15, -0.3])[dti.dayofweek]
    log_sales = (
        8.5 + store_effect[store - 1] + dow_effect + 0.25 * pdf["Promo"] + 0.01 * pdf["Mean_TemperatureC"]
        + rng.normal(0, NOISE, n)
    )
    pdf["Sales"] = np.exp(log_sales).astype(np.float32)
    return pdf


def _encode(pdf: pd.DataFrame, vocab: dict[str, list]) -> pd.DataFrame:
    out = pdf.copy()
    for col in CATEGORICAL:
        index = {v: i + 1 for i, v in enumerate(vocab[col])}
        out[col] = out[col].map(index).fillna(0).astype(np.int32)
    for col in CONTINUOUS:
        out[col] = out[col].astype(np.float32)
    return out


def _write(pdf: pd.DataFrame, path: Path) -> None:
    path.mkdir(parents=True)
    for i, part in enumerate(np.array_split(np.arange(len(pdf)), FILES_PER_SPLIT)):
        table = pa.Table.from_pandas(pdf.iloc[part].reset_index(drop=True), preserve_index=False)
        pq.write_table(table, path / f"part-{i:05d}.parquet")


def make_prepared(out_dir: Path, stores: int = 20, train_days: int = 240, seed: int = 0) -> Path:
    """Write metadata.json and train/val/test Parquet (8 files each) under out_dir; return out_dir."""
    rng = np.random.default_rng(seed)
    store_effect = rng.normal(0, 0.4, stores)
    train = _frame(rng, stores, pd.date_range("2014-01-01", periods=train_days), store_effect)
    val = _frame(rng, stores, pd.date_range("2014-01-01", periods=28) + pd.Timedelta(days=train_days), store_effect)
    test = _frame(rng, stores, pd.date_range("2015-01-01", periods=14), store_effect).drop(columns=["Sales"])
    test["Open"] = (rng.random(len(test)) > 0.15).astype(np.int32)
    test["Id"] = rng.permutation(np.arange(1, len(test) + 1)).astype(np.int32)

    vocab = {c: sorted(train[c].unique().tolist()) for c in CATEGORICAL}
    vocab = {c: [int(v) for v in values] for c, values in vocab.items()}
    for split in (train, val):
        split["Sales_log"] = np.log(split["Sales"]).astype(np.float32)
    for name, split in (("train", train), ("val", val), ("test", test)):
        _write(_encode(split, vocab), out_dir / name)
    metadata = {
        "categorical_cols": CATEGORICAL,
        "continuous_cols": CONTINUOUS,
        "vocab": vocab,
        "embedding_sizes": {c: len(v) + 1 for c, v in vocab.items()},
        "max_sales": float(train["Sales"].max()),
        "label_col": "Sales_log",
        "rows": {"train": len(train), "val": len(val), "test": len(test)},
        "backtest_window": [val["Date"].min(), val["Date"].max()],
        "test_window": [test["Date"].min(), test["Date"].max()],
    }
    (out_dir / "metadata.json").write_text(json.dumps(metadata, indent=1))
    return out_dir

