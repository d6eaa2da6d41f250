"""Load and validate the seven Rossmann CSV files into typed Spark DataFrames.

Every check runs before anything is written or trained, and every failure is a `RossmannDataError`
naming the file, the column and the problem.
"""

from __future__ import annotations

import concurrent.futures
import csv
import difflib
import logging
import os
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rossmann.dates import date_range
from rossmann.schema import STORE, STORE_STATES, TABLES, TEST, TRAIN, Column, Table

log = logging.getLogger(__name__)

_DATE_RE = r"^\d{4}-\d{2}-\d{2}$"
_WEEK_RE = r"^(\d{4}-\d{2}-\d{2}) - (\d{4}-\d{2}-\d{2})$"
_INT_RE = r"^[+-]?\d+(\.0*)?$"
_EXAMPLES = 3
_CHUNK = 1 << 24  # bytes read at a time by the UTF-8 check
_OTHER_SEPARATORS = (";", "\t", "|")  # what a one-column header line is split by instead of commas


class RossmannDataError(ValueError):
    """Bad input data: names the file, the column (when there is one) and the problem."""

    def __init__(self, path: str, column: str | None, problem: str):
        self.path, self.column, self.problem = path, column, problem
        where = f"{path}: column {column!r}" if column else path
        super().__init__(f"{where}: {problem}")


@dataclass
class RawData:
    """The seven input files as typed, cached Spark DataFrames (columns and names as in the CSV files)."""

    data_dir: str
    train: DataFrame
    test: DataFrame
    store: DataFrame
    store_states: DataFrame
    state_names: DataFrame
    googletrend: DataFrame
    weather: DataFrame

    cached: list[DataFrame] = field(default_factory=list, repr=False)  # what the frames above read from

    def unpersist(self) -> None:
        """Release the cached frames."""
        for frame in self.cached:
            frame.unpersist()


def load(spark: SparkSession, data_dir: str) -> RawData:
    """Read the seven CSV files from `data_dir`, check them, and return them typed.

    Raises RossmannDataError for a missing file, bytes that are not UTF-8 text, a missing or misspelt
    column, an empty table, an unparsable or missing value, a value outside its allowed set or bounds (e.g. negative sales), a
    duplicated key (e.g. Store and Date in train.csv), test dates not after the training data's last date, or
    train/test stores absent from store.csv or store_states.csv.
    """
    data_dir = os.path.abspath(data_dir)
    paths = {t.name: os.path.join(data_dir, t.file) for t in TABLES}
    for table in TABLES:  # all cheap file and header checks first
        _check_header(table, paths[table.name])
    _check_test_after_train(paths[TRAIN.name], paths[TEST.name])
    # The seven tables' Spark jobs at once, from threads: each is small, and one at a time they would leave the
    # cores idle while Spark plans the next (9 s instead of 12 s for the default data, docs/performance.md section 8).
    with concurrent.futures.ThreadPoolExecutor(len(TABLES), thread_name_prefix="rossmann-load") as pool:
        reads = [pool.submit(_read_table, spark, table, paths[table.name]) for table in TABLES]
    read = [(table, future.result()) for table, future in zip(TABLES, reads) if future.exception() is None]
    cached = [frame_cache for _, (_, frame_cache) in read]
    try:
        for future in reads:  # the first table's error in TABLES order, whichever thread failed first
            if future.exception() is not None:
                raise future.exception()
        raw = RawData(data_dir=data_dir, **{table.name: frame for table, (frame, _) in read}, cached=cached)
        _check_stores_known(raw, paths)
    except Exception:
        for frame in cached:
            frame.unpersist()
        raise
    log.info("loaded and checked %s", data_dir)
    return raw


def _check_test_after_train(train_path: str, test_path: str) -> None:
    """Every test date must come after the training data's last date (the model forecasts forward)."""
    train, test = date_range(train_path), date_range(test_path)
    if train and test and test[0] <= train[1]:
        raise RossmannDataError(test_path, "Date", f"dates overlap or precede the training data: first overlapping "
                                                   f"date {test[0]}, training data's last date {train[1]} (in "
                                                   f"{train_path}); every test date must come after it")


def _read_header(path: str) -> list[str]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return [h.strip() for h in next(csv.reader(f), [])]


def _check_utf8(path: str) -> None:
    """Raise a RossmannDataError naming the line, column and byte of the first bytes that are not UTF-8."""
    line, rest = 1, b""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            data = rest + chunk
            cut = data.rfind(b"\n") + 1 if chunk else len(data)  # decode whole lines only
            part, rest = data[:cut], data[cut:]
            try:
                part.decode("utf-8")
            except UnicodeDecodeError as err:
                raise _not_utf8(path, part, err, line + part.count(b"\n", 0, err.start)) from None
            line += part.count(b"\n")
            if not chunk:
                return


def _not_utf8(path: str, data: bytes, err: UnicodeDecodeError, line: int) -> RossmannDataError:
    start = data.rfind(b"\n", 0, err.start) + 1
    end = data.find(b"\n", err.start)
    raw = data[start:end if end >= 0 else len(data)].rstrip(b"\r")
    text = raw.decode("utf-8", errors="replace")
    column = None
    if line > 1:
        try:
            cells = next(csv.reader([text]), [])
        except csv.Error:  # e.g. a carriage return in the middle of the line: name no column
            cells = []
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            header = [h.strip() for h in next(csv.reader(f), [])]
        column = next((header[i] for i, cell in enumerate(cells) if "\ufffd" in cell and i < len(header)), None)
    what = "the header line" if line == 1 else f"line {line}"
    return RossmannDataError(path, column, f"not UTF-8 text: byte {data[err.start]:#04x} at {what}, byte "
                                           f"{err.start - start + 1} ({err.reason}): {raw[:200]!r}; save the file "
                                           "as UTF-8")


def _check_header(table: Table, path: str) -> None:
    if not os.path.isfile(path):
        raise RossmannDataError(path, None, f"missing file (expected {table.file} in {os.path.dirname(path)})")
    _check_utf8(path)
    header = _read_header(path)
    if not header:
        raise RossmannDataError(path, None, "empty file: no header line")
    separator = next((s for s in _OTHER_SEPARATORS if len(header) == 1 and s in header[0]), None)
    if separator is not None:
        raise RossmannDataError(path, None, f"separated by {separator!r}, not ',': the header line is {header[0][:200]!r}; "
                                            "save the file comma-separated")
    for name in table.column_names:
        if name not in header:
            close = difflib.get_close_matches(name, header, n=1, cutoff=0.6)
            hint = f"; found {close[0]!r}: misspelt?" if close else f"; columns found: {', '.join(header)}"
            raise RossmannDataError(path, name, f"missing column{hint}")


def _typed(col: Column) -> tuple[SparkColumn, SparkColumn, SparkColumn]:
    """(typed value, unparsable-or-missing flag, out-of-bounds flag) of one trimmed string column."""
    raw, name = F.col(f"`{col.name}`"), f"`{col.name}`"
    if col.kind == "int":
        value = F.when(raw.rlike(_INT_RE), raw.cast("double").cast("int"))
    elif col.kind == "float":
        value = F.expr(f"try_cast({name} AS DOUBLE)")
        value = F.when(~F.isnan(value), value)
    elif col.kind == "date":
        value = F.when(raw.rlike(_DATE_RE), F.expr(f"try_cast({name} AS DATE)"))
    elif col.kind == "week":
        value = F.when(raw.rlike(_WEEK_RE) & F.expr(f"try_cast(substring({name}, 1, 10) AS DATE)").isNotNull(), raw)
    else:
        value = raw
    bad = raw.isNotNull() & value.isNull()
    if col.allowed:
        bad = bad | ~raw.isin(*col.allowed)
    if not col.nullable:
        bad = bad | raw.isNull()
    out = F.lit(False)
    low, high = col.bounds or (None, None)
    if low is not None:
        out = out | (value < low)
    if high is not None:
        out = out | (value > high)
    return value, F.coalesce(bad, F.lit(False)), F.coalesce(out, F.lit(False))


def _problem(col: Column) -> str:
    if col.kind == "date":
        return "unparsable date (expected YYYY-MM-DD)"
    if col.kind == "week":
        return "unparsable week (expected 'YYYY-MM-DD - YYYY-MM-DD')"
    if col.allowed:
        return f"value outside {{{', '.join(col.allowed)}}}"
    return f"unparsable {'integer' if col.kind == 'int' else 'number'}"


def _out_of_bounds(col: Column) -> str:
    low, high = col.bounds
    return "negative value" if (low, high) == (0, None) else f"value outside [{low}, {high}]"


def _read_table(spark: SparkSession, table: Table, path: str) -> tuple[DataFrame, DataFrame]:
    """Read all columns as strings; type and check every value and the key in one pass over the file, which
    also caches the result. Returns (typed frame, the cached frame it selects from)."""
    header = _read_header(path)
    schema = T.StructType([T.StructField(h, T.StringType()) for h in header])
    strings = spark.read.csv(path, header=True, schema=schema)
    trimmed = strings.select(*[
        F.when(F.trim(F.col(f"`{c.name}`")) != "", F.trim(F.col(f"`{c.name}`"))).alias(c.name)
        for c in table.columns
    ])
    typed = {c.name: _typed(c) for c in table.columns}
    flagged = [(c, kind, f"__{kind}__{c.name}") for c in table.columns for kind in ("bad", "out")
               if kind == "bad" or c.bounds]
    checked = trimmed.select(
        *[typed[c.name][0].alias(c.name) for c in table.columns],
        *[F.when(typed[c.name][1 if kind == "bad" else 2], F.coalesce(F.col(f"`{c.name}`"), F.lit(""))).alias(name)
          for c, kind, name in flagged],
    ).persist(StorageLevel.MEMORY_AND_DISK_DESER)
    keys = [F.count_distinct(F.xxhash64(*table.key)).alias("__keys")] if table.key else []
    stats = checked.agg(F.count(F.lit(1)).alias("__rows"), *[F.count(name).alias(name) for _, _, name in flagged],
                        *keys).first()
    result = checked.select(*table.column_names)
    try:
        if stats["__rows"] == 0:
            raise RossmannDataError(path, None, "empty table: a header but no rows")
        for c, kind, name in flagged:
            if stats[name]:
                what = _problem(c) + ("" if c.nullable else " or missing value") if kind == "bad" else _out_of_bounds(c)
                example = checked.filter(F.col(name).isNotNull()).select(name).first()[0]
                raise RossmannDataError(path, c.name, f"{stats[name]} row(s) with {what}, "
                                                      f"e.g. {example!r} {_locate(path, c.name, example)}")
        if table.key and stats["__keys"] < stats["__rows"]:  # a duplicate, or a 64-bit hash collision
            _raise_duplicate(result, table, path)
    except RossmannDataError:
        checked.unpersist()
        raise
    log.info("%s: %d rows", path, stats["__rows"])
    return result, checked


def _locate(path: str, column: str, value: str) -> str:
    """'at line N: <raw line>' for the first data line whose `column` holds `value` (error path only)."""
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:  # never fail while reporting
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader)]
        idx = header.index(column)
        for row in reader:
            cell = row[idx].strip() if idx < len(row) else ""
            if cell == value:
                line = ",".join(row)
                return f"at line {reader.line_num}: {line[:200]}"
    return ""


def _check_stores_known(raw: RawData, paths: dict[str, str]) -> None:
    """Every store of train.csv and test.csv must be in store.csv and store_states.csv (one Spark job)."""
    used = (raw.train.select("Store", F.lit(TRAIN.name).alias("used_in"))
            .union(raw.test.select("Store", F.lit(TEST.name).alias("used_in"))).distinct())
    missing = None
    for ref_table, ref in ((STORE, raw.store), (STORE_STATES, raw.store_states)):
        absent = used.join(ref.select("Store"), "Store", "left_anti").withColumn("absent_from", F.lit(ref_table.name))
        missing = absent if missing is None else missing.union(absent)
    rows = missing.orderBy("used_in", "absent_from", "Store").limit(100).collect()
    if rows:
        first = rows[0]
        ids = sorted({r.Store for r in rows if (r.used_in, r.absent_from) == (first.used_in, first.absent_from)})
        shown = ", ".join(map(str, ids[:_EXAMPLES])) + (" ..." if len(ids) > _EXAMPLES else "")
        raise RossmannDataError(paths[first.used_in], "Store",
                                f"stores absent from {paths[first.absent_from]}: {shown}")


def _raise_duplicate(frame: DataFrame, table: Table, path: str) -> None:
    dup = frame.groupBy(*table.key).count().filter("count > 1").orderBy(*table.key).first()
    if dup is None:
        return
    values = ", ".join(f"{k}={dup[k]}" for k in table.key)
    raise RossmannDataError(path, ",".join(table.key), f"duplicated key: {values} occurs {dup['count']} times")
