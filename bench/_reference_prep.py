"""The reference example's data-preparation approach, re-implemented to produce exactly our features.

Horovod's examples/spark/keras/keras_spark_rossmann_estimator.py prepares Rossmann like this:
  * the Before/After event counters (``add_elapsed``): repartition by Store, sort within partitions by
    Store and Date (descending for Before, ascending for After), and walk the rows in Python
    ``mapPartitions``, one pass per event column, rebuilding a ``Row(**fields)`` per row; back to a
    DataFrame with ``rdd.toDF()``; joined back to the data on (Date, Store);
  * the vocabulary (``build_vocabulary``): one ``select(col).distinct().collect()`` job per column;
  * the encoding (``lookup_columns``): a Python UDF per categorical column, ``mapping.index(value)``.
The joins, date parts, store crosses, competition and Promo2 columns are plain column expressions there as here, so they
are shared with ``rossmann.features``. The definitions (what a counter counts, indices 1..n with 0 for
unknown, float32 continuous columns) are ours, so that both outputs can be compared value for value.
"""

from __future__ import annotations

import os

from pyspark import Row, StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rossmann.data import RawData
from rossmann.dates import backtest_window
from rossmann.encoding import _vocab_key
from rossmann.features import (
    BACKTEST,
    CATEGORICAL_COLS,
    CONTINUOUS_COLS,
    COUNTER_HORIZON,
    EVENT_COLS,
    LABEL_COL,
    add_competition_features,
    add_date_parts,
    add_promo2_features,
    add_store_crosses,
    join_sources,
)
from rossmann.prepared import write_prepared


def _is_event(value) -> bool:
    return value is not None and str(value) != "0"


def add_elapsed(df: DataFrame, cols: list[str], horizon: int = COUNTER_HORIZON) -> DataFrame:
    """The reference's add_elapsed: Python passes over rows sorted by Store and Date (counting our way: at
    most `horizon` days, and `horizon` before a store's first event or after its last)."""

    def add_elapsed_column(col, asc):
        def fn(rows):
            last_store, last_date = None, None
            for r in rows:
                if last_store != r.Store:
                    last_store = r.Store
                    last_date = None
                if _is_event(r[col]):
                    last_date = r.Date
                fields = r.asDict().copy()
                days = horizon if last_date is None else min(horizon, abs((r.Date - last_date).days))
                fields[("After" if asc else "Before") + col] = days
                yield Row(**fields)

        return fn

    df = df.repartition(df.Store)
    for asc in [False, True]:
        sort_col = df.Date.asc() if asc else df.Date.desc()
        rdd = df.sortWithinPartitions(df.Store.asc(), sort_col).rdd
        for col in cols:
            rdd = rdd.mapPartitions(add_elapsed_column(col, asc))
        df = rdd.toDF()
    return df


def build_vocabulary(df: DataFrame, cols: list[str]) -> dict[str, list[str]]:
    """The reference's build_vocabulary: one distinct-collect job per column (values as strings)."""
    vocab = {}
    for col in cols:
        values = [r[0] for r in df.select(F.col(col).cast("string")).distinct().collect() if r[0] is not None]
        vocab[col] = sorted(values, key=_vocab_key)
    return vocab


def lookup_columns(df: DataFrame, vocab: dict[str, list[str]]) -> DataFrame:
    """The reference's lookup_columns: a Python UDF per column, ``mapping.index(value)`` (+1; 0 = unknown)."""

    def lookup(mapping):
        def fn(v):
            return mapping.index(v) + 1 if v in mapping else 0

        return F.udf(fn, returnType=T.IntegerType())

    for col, mapping in vocab.items():
        df = df.withColumn(col, lookup(mapping)(F.col(col).cast("string")))
    return df


def cast_columns(df: DataFrame, cols: list[str]) -> DataFrame:
    for col in cols:
        df = df.withColumn(col, F.coalesce(F.col(col).cast(T.FloatType()), F.lit(0.0).cast(T.FloatType())))
    return df


def prepare(spark: SparkSession, raw: RawData, out_dir: str, min_row_groups: int = 8) -> dict:
    """Our ``rossmann.features.prepare`` outputs (same splits, columns and files), the reference's way."""
    out_dir = os.path.abspath(out_dir)
    test_start, test_end = raw.test.agg(F.min("Date"), F.max("Date")).first()
    val_start, val_end = backtest_window(raw.train.agg(F.max("Date")).first()[0], (test_start, test_end))
    both = (raw.train.withColumn("_test", F.lit(False))
            .unionByName(raw.test.withColumn("_test", F.lit(True)), allowMissingColumns=True))
    joined = add_store_crosses(add_date_parts(join_sources(both, raw)))
    joined = add_promo2_features(add_competition_features(joined))
    df = joined = joined.persist(StorageLevel.MEMORY_AND_DISK_DESER)  # the reference caches here too
    elapsed = add_elapsed(df.select("Date", "Store", *EVENT_COLS), EVENT_COLS)
    counters = [prefix + col for prefix in ("Before", "After") for col in EVENT_COLS]
    df = df.join(elapsed.select("Date", "Store", *counters), ["Date", "Store"])
    befores = ["Before" + col for col in EVENT_COLS]  # the backtest's, as if the data ended with train.csv
    seen = add_elapsed(joined.filter(~F.col("_test")).select("Date", "Store", *EVENT_COLS), EVENT_COLS)
    df = df.join(seen.select("Date", "Store", *[F.col(b).alias(BACKTEST + b) for b in befores]), ["Date", "Store"],
                 "left")
    keep = F.col("_test") | ((F.col("Open") == 1) & (F.col("Sales") > 0))
    split = (F.when(F.col("_test"), "test")
             .when(F.col("Date").between(F.lit(val_start), F.lit(val_end)), "val").otherwise("train"))
    df = df.filter(keep).withColumn("_split", split)
    for before in befores:
        df = df.withColumn(before, F.when(F.col("_split") == "val", F.col(BACKTEST + before)).otherwise(F.col(before)))
    df = (df.select("_split", "Date", "Sales", "Id", "Open", *CATEGORICAL_COLS, *CONTINUOUS_COLS)
          .persist(StorageLevel.MEMORY_AND_DISK_DESER))
    counts = {r["_split"]: r["count"] for r in df.groupBy("_split").count().collect()}
    vocab = build_vocabulary(df, CATEGORICAL_COLS)
    max_sales = df.filter(F.col("_split") != "test").agg(F.max("Sales")).first()[0]
    encoded = (lookup_columns(cast_columns(df, CONTINUOUS_COLS), vocab)
               .withColumn("Date", F.date_format("Date", "yyyy-MM-dd"))
               .withColumn(LABEL_COL, F.log("Sales").cast("float"))
               .withColumn("Sales", F.col("Sales").cast("float"))
               .withColumn("Id", F.col("Id").cast("int"))
               .withColumn("Open", F.coalesce("Open", F.lit(1)).cast("int")))
    features_cols = CATEGORICAL_COLS + CONTINUOUS_COLS
    columns = {"train": features_cols + [LABEL_COL, "Sales", "Date"],
               "val": features_cols + [LABEL_COL, "Sales", "Date"],
               "test": features_cols + ["Id", "Open", "Date"]}
    metadata = {"categorical_cols": CATEGORICAL_COLS, "continuous_cols": CONTINUOUS_COLS, "vocab": vocab,
                "embedding_sizes": {c: len(v) + 1 for c, v in vocab.items()}, "max_sales": float(max_sales),
                "label_col": LABEL_COL, "rows": {s: counts[s] for s in columns},
                "backtest_window": [val_start.isoformat(), val_end.isoformat()],
                "test_window": [test_start.isoformat(), test_end.isoformat()]}
    try:
        write_prepared({name: encoded.filter(F.col("_split") == name).select(*cols) for name, cols in columns.items()},
                       metadata, out_dir, min_row_groups)
    finally:
        df.unpersist()
        joined.unpersist()
    return metadata
