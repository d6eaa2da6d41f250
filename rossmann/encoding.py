"""Categorical vocabularies and the encoding of the featured rows into model inputs (Spark): index 0 for an unknown
or missing value, values 1..n in the vocabulary's order; continuous columns as float32."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def _vocab_key(value: str) -> tuple[int, float, str]:
    try:
        return 0, float(value), value
    except ValueError:
        return 1, 0.0, value


def build_vocabs(df: DataFrame, cols: list[str], *subsets: Column) -> list[dict[str, list[str]]]:
    """Distinct non-null values of each column as strings, numbers in numeric order: over all rows, then over the
    rows where each of ``subsets`` holds; all in one pass."""
    wheres = [F.lit(True), *subsets]  # Spark's optimizer folds when(true, x) into x
    row = df.agg(*[F.collect_set(F.when(where, F.col(c).cast("string"))).alias(f"{i}_{c}")
                   for i, where in enumerate(wheres) for c in cols]).first()
    return [{c: sorted(row[f"{i}_{c}"], key=_vocab_key) for c in cols} for i in range(len(wheres))]


def encode(df: DataFrame, vocab: dict[str, list[str]], continuous: list[str]) -> DataFrame:
    """Categoricals to int32 indices (value i of the vocabulary -> i + 1; unknown or null -> 0),
    continuous columns to float32 (null -> 0). One projection: a ``withColumn`` per column made Spark analyse a plan
    one level deeper each time (docs/performance.md section 3)."""
    encoded = {col: F.coalesce(_lookup(F.col(col), values), F.lit(0)).cast("int") for col, values in vocab.items()}
    encoded.update({col: F.coalesce(F.col(col).cast("float"), F.lit(0.0).cast("float")) for col in continuous})
    return df.withColumns(encoded)


def _lookup(col: Column, values: list[str]) -> Column:
    """Index (from 1) of `col` in `values`, null if absent: an array lookup for a compact range of
    integers (constant time), else a map lookup (Spark scans a literal map's keys)."""
    ints = [int(v) for v in values] if all(v.lstrip("-").isdigit() for v in values) else []
    if ints and ints[-1] - ints[0] < 100_000:
        table = [0] * (ints[-1] - ints[0] + 1)
        for i, v in enumerate(ints, 1):
            table[v - ints[0]] = i
        pos = col.cast("long") - ints[0] + 1
        # one SQL literal, not an F.lit per entry: each is a call into the JVM (11,000 for the real data's
        # StoreDayOfWeek)
        found = F.element_at(F.expr(f"array({','.join(map(str, table))})"), pos.cast("int"))
        return F.when(pos.between(1, len(table)) & (found > 0), found)
    return F.create_map(*[F.lit(x) for i, v in enumerate(values, 1) for x in (v, i)])[col.cast("string")]
