"""Bad input gets a RossmannDataError naming the file, the column and the problem, before anything is written."""

from __future__ import annotations

import os
import shutil

import pandas as pd
import pytest

from rossmann.data import RossmannDataError, load
from rossmann.features import prepare
from rossmann.schema import TABLES


@pytest.fixture
def data_dir(tiny_data, tmp_path) -> str:
    """A private copy of the tiny synthetic dataset, free to break."""
    path = str(tmp_path / "data")
    shutil.copytree(tiny_data.out_dir, path)
    return path


def _edit(data_dir: str, file: str, change) -> str:
    path = os.path.join(data_dir, file)
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    change(frame)
    frame.to_csv(path, index=False)
    return path


def test_good_data_loads_with_real_column_names(tiny_raw):
    for table in TABLES:
        assert getattr(tiny_raw, table.name).columns == table.column_names
    assert tiny_raw.train.schema["Date"].dataType.typeName() == "date"
    assert tiny_raw.test.filter("Open IS NULL").count() > 0  # empty Open in test.csv is kept as null
    assert {r[0] for r in tiny_raw.train.select("StateHoliday").distinct().collect()} >= {"0", "a"}  # "0" unquoted


def test_missing_file(spark, data_dir):
    os.remove(os.path.join(data_dir, "weather.csv"))
    with pytest.raises(RossmannDataError, match=r"weather\.csv: missing file") as err:
        load(spark, data_dir)
    assert err.value.path == os.path.join(data_dir, "weather.csv")


def test_misspelt_column_suggests_the_close_name(spark, data_dir):
    path = _edit(data_dir, "store.csv", lambda f: f.rename(columns={"CompetitionDistance": "CompetitionDistnace"},
                                                           inplace=True))
    with pytest.raises(RossmannDataError) as err:
        load(spark, data_dir)
    assert (err.value.path, err.value.column) == (path, "CompetitionDistance")
    assert "missing column" in str(err.value) and "'CompetitionDistnace': misspelt?" in str(err.value)


def test_a_semicolon_separated_file_names_the_separator_found(data_dir):
    path = os.path.join(data_dir, "store.csv")
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.to_csv(path, sep=";", index=False)
    with pytest.raises(RossmannDataError) as err:
        load(None, data_dir)  # type: ignore[arg-type]  # a header check: before any Spark work
    assert (err.value.path, err.value.column) == (path, None)
    assert "separated by ';', not ','" in str(err.value) and "Store;StoreType" in str(err.value)


def test_test_dates_inside_the_training_period_fail_before_spark(data_dir):
    """test.csv shifted 20 days back overlaps train.csv's last days: named with both dates, with no Spark session
    at all (the check runs before any Spark work)."""
    def shift(frame: pd.DataFrame) -> None:
        frame["Date"] = (pd.to_datetime(frame["Date"]) - pd.Timedelta(days=20)).dt.strftime("%Y-%m-%d")

    path = _edit(data_dir, "test.csv", shift)
    with pytest.raises(RossmannDataError) as err:
        load(None, data_dir)  # type: ignore[arg-type]
    assert (err.value.path, err.value.column) == (path, "Date")
    assert "first overlapping date 2015-07-12, training data's last date 2015-07-31" in str(err.value)


def test_empty_train(spark, data_dir):
    path = _edit(data_dir, "train.csv", lambda f: f.drop(f.index, inplace=True))
    with pytest.raises(RossmannDataError, match="empty table") as err:
        load(spark, data_dir)
    assert err.value.path == path


def test_unparsable_date_shows_value_and_line(spark, data_dir):
    path = _edit(data_dir, "train.csv", lambda f: f.loc.__setitem__((41, "Date"), "2015-13-01"))
    with pytest.raises(RossmannDataError) as err:
        load(spark, data_dir)
    assert (err.value.path, err.value.column) == (path, "Date")
    assert "unparsable date" in str(err.value) and "'2015-13-01'" in str(err.value)
    assert "at line 43:" in str(err.value)  # header is line 1, row 41 is line 43


def test_negative_sales(spark, data_dir):
    path = _edit(data_dir, "train.csv", lambda f: f.loc.__setitem__((7, "Sales"), "-250"))
    with pytest.raises(RossmannDataError, match=r"1 row\(s\) with negative value, e\.g\. '-250' at line 9") as err:
        load(spark, data_dir)
    assert (err.value.path, err.value.column) == (path, "Sales")


def test_of_two_broken_files_the_first_in_table_order_is_named(spark, data_dir):
    """The tables are checked at once, from threads; the error is still the first table's (train.csv before
    weather.csv), whichever check ends first, and the tables that were fine are released from the cache."""
    path = _edit(data_dir, "train.csv", lambda f: f.loc.__setitem__((7, "Sales"), "-250"))
    _edit(data_dir, "weather.csv", lambda f: f.__setitem__("Max_TemperatureC", "hot"))
    cached_before = len(spark.sparkContext._jsc.getPersistentRDDs())
    with pytest.raises(RossmannDataError) as err:
        load(spark, data_dir)
    assert (err.value.path, err.value.column) == (path, "Sales")
    assert len(spark.sparkContext._jsc.getPersistentRDDs()) == cached_before


def test_test_store_absent_from_store_csv(spark, data_dir):
    path = _edit(data_dir, "test.csv", lambda f: f.loc.__setitem__((3, "Store"), "777"))
    with pytest.raises(RossmannDataError, match=r"stores absent from .*store\.csv: 777") as err:
        load(spark, data_dir)
    assert (err.value.path, err.value.column) == (path, "Store")


def test_duplicated_train_row(spark, data_dir):
    path = _edit(data_dir, "train.csv", lambda f: f.loc.__setitem__(len(f), f.iloc[5]))
    with pytest.raises(RossmannDataError, match="duplicated key") as err:
        load(spark, data_dir)
    assert (err.value.path, err.value.column) == (path, "Store,Date")


def _break_field(path: str, line: int, field: int, byte: bytes) -> None:
    """Append `byte` to field `field` (0-based, before any quoted field) of line `line` (1-based)."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    cells = lines[line - 1].split(b",")
    cells[field] += byte
    lines[line - 1] = b",".join(cells)
    with open(path, "wb") as f:
        f.write(b"\n".join(lines))


def test_latin1_byte_names_file_line_and_column(spark, data_dir):
    path = os.path.join(data_dir, "store.csv")
    _break_field(path, 3, 1, "\u00e4".encode("latin-1"))  # the second store's StoreType gets a Latin-1 a-umlaut
    with pytest.raises(RossmannDataError) as err:
        load(spark, data_dir)
    assert (err.value.path, err.value.column) == (path, "StoreType")
    assert "not UTF-8 text: byte 0xe4 at line 3" in str(err.value)


def test_bad_byte_on_line_2001_is_reported_with_a_bad_value_before_it(spark, small_data, tmp_path):
    """A negative sale on line 9 and a bad byte on line 2001: every file is checked as text before any value
    (the byte is reported), and building the message crashes on neither."""
    data_dir = str(tmp_path / "data")
    shutil.copytree(small_data.out_dir, data_dir)
    path = _edit(data_dir, "train.csv", lambda f: f.loc.__setitem__((7, "Sales"), "-250"))
    _break_field(path, 2001, 0, b"\xff")
    with pytest.raises(RossmannDataError, match=r"not UTF-8 text: byte 0xff at line 2001, byte \d+ "
                                                r"\(invalid start byte\)") as err:
        load(spark, data_dir)
    assert (err.value.path, err.value.column) == (path, "Store")


def test_binary_garbage(spark, data_dir):
    path = os.path.join(data_dir, "weather.csv")
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40)  # an image where the weather should be
    with pytest.raises(RossmannDataError, match=r"weather\.csv: not UTF-8 text: byte 0x89 at the header line") as err:
        load(spark, data_dir)
    assert err.value.path == path


def test_prepare_leaves_nothing_behind_when_it_fails(spark, tiny_raw, tmp_path, monkeypatch):
    out = tmp_path / "prepared"
    # Fails before writing: too few rows for that many row groups.
    with pytest.raises(RossmannDataError, match="at least 10000 needed"):
        prepare(spark, tiny_raw, str(out), min_row_groups=10_000)
    assert os.listdir(tmp_path) == []
    # Fails after the Parquet files are written: the temporary folder goes too.
    monkeypatch.setattr("rossmann.prepared._write_metadata", _boom)
    with pytest.raises(OSError, match="disk full"):
        prepare(spark, tiny_raw, str(out))
    assert os.listdir(tmp_path) == []


def test_prepare_refuses_to_overwrite_a_foreign_folder(spark, tiny_raw, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        prepare(spark, tiny_raw, str(tmp_path))
    assert os.listdir(tmp_path) == ["notes.txt"]


def _boom(*_):
    raise OSError("disk full")
