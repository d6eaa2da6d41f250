"""Feature steps on tiny frames, against answers worked out by hand."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import functions as F

from rossmann.data import RawData
from rossmann.dates import backtest_window
from rossmann.features import (
    BACKTEST,
    NO_COMPETITION_DISTANCE,
    add_competition_features,
    add_date_parts,
    add_event_counters,
    add_promo2_features,
    build_vocabs,
    encode,
    join_sources,
    split_rows,
)

D = dt.date


def _rows(df, *cols):
    return [tuple(r[c] for c in cols) for r in df.orderBy("Store", "Date").collect()]


def test_event_counters_restart_at_each_store(spark):
    # Store 1 has no row on 4 and 5 January: counters are calendar days, not rows.
    rows = [
        (1, D(2015, 1, 1), 0, "0", 1), (1, D(2015, 1, 2), 1, "a", 0), (1, D(2015, 1, 3), 0, "0", 0),
        (1, D(2015, 1, 6), 0, "0", 0), (1, D(2015, 1, 7), 1, "b", 1),
        (2, D(2015, 1, 3), 0, "0", 0), (2, D(2015, 1, 4), 0, "0", 0), (2, D(2015, 1, 5), 1, "0", 0),
        (2, D(2015, 1, 6), 0, "0", 0), (2, D(2015, 1, 7), 0, "0", 0), (2, D(2015, 1, 8), 0, "c", 0),
    ]
    df = spark.createDataFrame(rows, "Store int, Date date, Promo int, StateHoliday string, SchoolHoliday int")
    out = add_event_counters(df, horizon=4)
    # After: days since the latest event (0 on the day), Before: days until the next one (0 on the day), both at
    # most 4, and 4 when the data shows no such event (before the store's first event, after its last).
    assert _rows(out, "AfterPromo", "BeforePromo") == [
        (4, 1), (0, 0), (1, 4), (4, 1), (0, 0),          # store 1: promo on 2 and 7 January
        (4, 2), (4, 1), (0, 0), (1, 4), (2, 4), (3, 4),  # store 2 restarts: 2 January of store 1 is not seen
    ]
    assert _rows(out, "AfterStateHoliday", "BeforeStateHoliday") == [
        (4, 1), (0, 0), (1, 4), (4, 1), (0, 0),
        (4, 4), (4, 4), (4, 3), (4, 2), (4, 1), (0, 0),
    ]
    assert _rows(out, "AfterSchoolHoliday", "BeforeSchoolHoliday") == [
        (0, 0), (1, 4), (2, 4), (4, 1), (0, 0),
        (4, 4), (4, 4), (4, 4), (4, 4), (4, 4), (4, 4),
    ]


def test_backtest_counters_do_not_see_the_hidden_rows(spark):
    rows = [(1, D(2015, 1, d), int(d in (2, 7)), d >= 6) for d in (1, 2, 3, 5, 6, 7)]
    df = spark.createDataFrame(rows, "Store int, Date date, Promo int, hidden boolean")
    out = add_event_counters(df, ["Promo"], horizon=4, hidden_from_backtest=F.col("hidden"))
    # As if the data ended on 5 January: the promo of 7 January is unknown, so 3 and 5 January see none coming.
    assert _rows(out, "BeforePromo", f"{BACKTEST}BeforePromo") == [(1, 1), (0, 0), (4, 4), (2, 4), (1, 4), (0, 4)]


def test_competition_months_open_clamped_to_0_24(spark):
    rows = [  # Store, Date, distance, since month, since year
        (1, D(2013, 3, 1), 500.0, 1, 2013),   # since 2013-01-15: 45 days -> 1 month
        (2, D(2015, 1, 1), 500.0, 5, 2010),   # years ago: 720 days cap -> 24
        (3, D(2015, 3, 1), 500.0, 6, 2015),   # opens later: 0
        (4, D(2015, 3, 1), None, None, None),  # unknown: 0, year 1900, no distance -> large value
    ]
    df = spark.createDataFrame(rows, "Store int, Date date, CompetitionDistance double, "
                                     "CompetitionOpenSinceMonth int, CompetitionOpenSinceYear int")
    out = add_competition_features(df)
    assert _rows(out, "CompetitionMonthsOpen", "CompetitionOpenSinceYear", "CompetitionDistance") == [
        (1, 2013, 500.0), (24, 2010, 500.0), (0, 2015, 500.0), (0, 1900, NO_COMPETITION_DISTANCE)]


def test_promo2_weeks_clamped_to_0_25(spark):
    rows = [  # Promo2 since week 10 of 2014 = 2014-01-01 + 63 days = 2014-03-05
        (1, D(2014, 3, 20), 10, 2014),   # 15 days -> 2 weeks
        (2, D(2015, 1, 1), 10, 2014),    # 302 days, capped at 175 -> 25
        (3, D(2014, 3, 1), 10, 2014),    # before it starts -> 0
        (4, D(2014, 3, 1), None, None),  # no Promo2 -> 0, year 1900
    ]
    df = spark.createDataFrame(rows, "Store int, Date date, Promo2SinceWeek int, Promo2SinceYear int")
    out = add_promo2_features(df)
    assert _rows(out, "Promo2Since", "Promo2Weeks", "Promo2SinceYear") == [
        (D(2014, 3, 5), 2, 2014), (D(2014, 3, 5), 25, 2014), (D(2014, 3, 5), 0, 2014), (D(1900, 1, 1), 0, 1900)]


def test_date_parts(spark):
    df = spark.createDataFrame([(1, D(2015, 7, 27)), (2, D(2015, 8, 2)), (3, D(2016, 1, 1))], "Store int, Date date")
    out = add_date_parts(df)
    # 2015-07-27 is a Monday (1) of ISO week 31, 2015-08-02 a Sunday (7); 2016-01-01 is in ISO week 53.
    assert _rows(out, "Year", "Month", "Day", "Week", "DayOfWeek") == [
        (2015, 7, 27, 31, 1), (2015, 8, 2, 31, 7), (2016, 1, 1, 53, 5)]


def test_backtest_window_is_as_long_as_the_test_period_at_the_end_of_train():
    assert backtest_window(D(2015, 7, 31), (D(2015, 8, 1), D(2015, 9, 17))) == (D(2015, 6, 14), D(2015, 7, 31))
    assert backtest_window(D(2016, 3, 1), (D(2016, 3, 2), D(2016, 3, 2))) == (D(2016, 3, 1), D(2016, 3, 1))


def test_vocabulary_includes_test_only_values_and_reserves_0(spark):
    train = spark.createDataFrame([(2, "Rain"), (10, None), (1, "Fog")], "Store int, Events string")
    test = spark.createDataFrame([(10, "Rain-Hail"), (3, "Rain")], "Store int, Events string")
    both = train.withColumn("train", F.lit(True)).unionByName(test.withColumn("train", F.lit(False)))
    vocab, trained = build_vocabs(both, ["Store", "Events"], F.col("train"))
    assert vocab == {"Store": ["1", "2", "3", "10"], "Events": ["Fog", "Rain", "Rain-Hail"]}  # numbers in order
    assert trained == {"Store": ["1", "2", "10"], "Events": ["Fog", "Rain"]}  # the same pass, train rows only
    encoded = encode(test.unionByName(spark.createDataFrame([(99, None)], "Store int, Events string")), vocab, [])
    assert [tuple(r) for r in encoded.collect()] == [(4, 3), (3, 2), (0, 0)]  # unknown store and null event: 0


def test_join_sources_maps_trend_weeks_states_and_weather(spark):
    def frame(rows, schema):
        return spark.createDataFrame(rows, schema)

    raw = RawData(
        data_dir="/nowhere",
        train=None, test=None,
        store=frame([(1, "a", "a", 100.0, None, None, 0, None, None, None)],
                    "Store int, StoreType string, Assortment string, CompetitionDistance double, "
                    "CompetitionOpenSinceMonth int, CompetitionOpenSinceYear int, Promo2 int, Promo2SinceWeek int, "
                    "Promo2SinceYear int, PromoInterval string"),
        store_states=frame([(1, "HB,NI")], "Store int, State string"),
        state_names=frame([("Niedersachsen", "HB,NI"), ("Bayern", "BY")], "StateName string, State string"),
        googletrend=frame([("Rossmann_DE_NI", "2015-07-26 - 2015-08-01", 60.0),
                           ("Rossmann_DE_NI", "2015-08-02 - 2015-08-08", 70.0),
                           ("Rossmann_DE_BY", "2015-08-02 - 2015-08-08", 99.0),
                           ("Rossmann_DE", "2015-07-26 - 2015-08-01", 50.0),
                           ("Rossmann_DE", "2015-08-02 - 2015-08-08", 55.0)], "file string, week string, trend double"),
        weather=spark.createDataFrame([("Niedersachsen", D(2015, 8, 1), 21.0, "Rain"),
                                       ("Niedersachsen", D(2015, 8, 2), 23.0, None),
                                       ("Bayern", D(2015, 8, 2), 30.0, "Fog")],
                                      "file string, Date date, Mean_TemperatureC double, Events string"),
    )
    for col in ("Max_TemperatureC", "Min_TemperatureC", "Max_Humidity", "Mean_Humidity", "Min_Humidity",
                "Max_Wind_SpeedKm_h", "Mean_Wind_SpeedKm_h", "CloudCover"):
        raw.weather = raw.weather.withColumn(col, raw.weather["Mean_TemperatureC"])
    days = spark.createDataFrame([(1, D(2015, 8, 1)), (1, D(2015, 8, 2)), (1, D(2015, 8, 3))], "Store int, Date date")
    out = join_sources(days, raw)
    # Saturday 1 August is in the week starting Sunday 26 July; NI in googletrend is HB,NI; no weather on 3 August.
    assert _rows(out, "State", "trend", "trend_de", "Mean_TemperatureC", "Events") == [
        ("HB,NI", 60.0, 50.0, 21.0, "Rain"), ("HB,NI", 70.0, 55.0, 23.0, None), ("HB,NI", 70.0, 55.0, None, None)]


@pytest.mark.parametrize("kind, no, yes", [("int", 0, 1), ("string", "0", "a"), ("boolean", False, True)])
def test_counters_accept_int_string_and_boolean_events(spark, kind, no, yes):
    rows = [(7, D(2015, 1, 1), no), (7, D(2015, 1, 2), None), (7, D(2015, 1, 5), no), (7, D(2015, 1, 6), yes)]
    out = add_event_counters(spark.createDataFrame(rows, f"Store int, Date date, Promo {kind}"), ["Promo"], horizon=9)
    # No event before 6 January (null is no event either): After is the horizon until then.
    assert _rows(out, "AfterPromo", "BeforePromo") == [(9, 5), (9, 4), (9, 1), (0, 0)]


def test_split_rows_samples_train_and_val_but_never_test(tiny_raw, tiny_data):
    window = tuple(D.fromisoformat(d) for d in tiny_data.backtest_window)

    def counts(*args):
        return {r["_split"]: r["count"] for r in split_rows(tiny_raw, window, *args).groupBy("_split").count().collect()}

    full, half = counts(), counts(0.5, 1)
    assert full["test"] == half["test"] == tiny_data.test_rows
    assert full["val"] == tiny_data.backtest_rows
    assert 0.4 < half["train"] / full["train"] < 0.6
