"""The broken-data cases of scripts/reliability.py: ``wf --data_dir`` on a copy of good data, broken in one way each
(or changed in a way the design accepts)."""

import shutil
from pathlib import Path
from typing import Callable, List

import pandas as pd

from tests.support import VENV_BIN


# ---------------------------------------------------------------- broken data: wf --data_dir <copy of good data>
def _edit(file: str, change) -> Callable[[Path], None]:
    def apply(data: Path) -> None:
        frame = pd.read_csv(data / file, dtype=str, keep_default_na=False)
        change(frame)
        frame.to_csv(data / file, index=False)
    return apply


def _append_byte(file: str, line: int, field: int, byte: bytes) -> Callable[[Path], None]:
    def apply(data: Path) -> None:
        lines = (data / file).read_bytes().split(b"\n")
        cells = lines[line - 1].split(b",")
        cells[field] += byte
        lines[line - 1] = b",".join(cells)
        (data / file).write_bytes(b"\n".join(lines))
    return apply


def _replace(file: str, content: bytes) -> Callable[[Path], None]:
    return lambda data: (data / file).write_bytes(content)


def _remove(file: str) -> Callable[[Path], None]:
    return lambda data: (data / file).unlink()


def _bom(file: str) -> Callable[[Path], None]:
    return lambda data: (data / file).write_bytes(b"\xef\xbb\xbf" + (data / file).read_bytes())


def _crlf(data: Path) -> None:
    for file in data.glob("*.csv"):
        file.write_bytes(file.read_bytes().replace(b"\n", b"\r\n"))


def _separated_by(file: str, separator: str) -> Callable[[Path], None]:
    def apply(data: Path) -> None:
        frame = pd.read_csv(data / file, dtype=str, keep_default_na=False)
        frame.to_csv(data / file, sep=separator, index=False)
    return apply


def _one_store(train: "pd.DataFrame", change) -> None:
    """Applies ``change`` to the rows of the first store of train.csv (a frame of strings)."""
    rows = train["Store"] == train["Store"].iloc[0]
    change(train, rows)


def _keep_rows(train: "pd.DataFrame", rows, count: int = 10) -> None:
    train.drop(train.index[rows][count:], inplace=True)


def _symlinked(data: Path) -> None:
    real = data.with_name(data.name + "-real")
    data.rename(real)
    data.symlink_to(real, target_is_directory=True)


def _extra_files(data: Path) -> None:
    (data / "README.txt").write_text("notes about these files\n")
    (data / ".DS_Store").write_bytes(bytes(range(64)))
    (data / "old").mkdir()
    shutil.copy(data / "store.csv", data / "old" / "store.csv")
    shutil.copy(data / "train.csv", data / "train.csv.bak")


def wf_command(*args: str) -> List[str]:
    return [str(VENV_BIN / "pyflyte"), "run", "workflows/rossmann.py", "wf", *args]


DATA = "{data}"  # replaced by the case's folder
DATA_CASES = [
    ("missing weather.csv", _remove("weather.csv"), r"weather\.csv: missing file"),
    ("a misspelt column in store.csv", _edit("store.csv", lambda f: f.rename(
        columns={"CompetitionDistance": "CompetitionDistnace"}, inplace=True)), r"missing column.*misspelt"),
    ("train.csv with a header only", _edit("train.csv", lambda f: f.drop(f.index, inplace=True)), r"empty table"),
    ("an unparsable date in train.csv", _edit("train.csv", lambda f: f.loc.__setitem__((41, "Date"), "2015-13-01")),
     r"unparsable date .*line 43"),
    ("a negative sale in train.csv", _edit("train.csv", lambda f: f.loc.__setitem__((7, "Sales"), "-250")),
     r"negative value.*line 9"),
    ("a test store absent from store.csv", _edit("test.csv", lambda f: f.loc.__setitem__((3, "Store"), "777")),
     r"stores absent from .*store\.csv: 777"),
    ("a duplicated row in train.csv", _edit("train.csv", lambda f: f.loc.__setitem__(len(f), f.iloc[5])),
     r"duplicated key"),
    ("a Latin-1 byte in store.csv", _append_byte("store.csv", 3, 1, "\u00e4".encode("latin-1")),
     r"store\.csv.*not UTF-8 text: byte 0xe4 at line 3"),
    ("one bad byte on line 2001 of train.csv", _append_byte("train.csv", 2001, 0, b"\xff"),
     r"train\.csv.*not UTF-8 text: byte 0xff at line 2001"),
    ("an image instead of weather.csv", _replace("weather.csv", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40),
     r"weather\.csv: not UTF-8 text"),
    ("test dates inside the training period", _edit("test.csv", lambda f: f.__setitem__("Date", (pd.to_datetime(
        f["Date"]) - pd.Timedelta(days=20)).dt.strftime("%Y-%m-%d"))), r"test\.csv: column 'Date': dates overlap"),
    ("store.csv not CSV at all", _replace("store.csv", b"just some notes\nno columns here\n"), r"store\.csv.*column"),
    ("store.csv separated by ';'", _separated_by("store.csv", ";"), r"store\.csv.*separated by ';'"),
    ("an empty Sales value in train.csv", _edit("train.csv", lambda f: f.loc.__setitem__((11, "Sales"), "")),
     r"train\.csv.*Sales.*line 13"),
    ("a 'nan' Sales value in train.csv", _edit("train.csv", lambda f: f.loc.__setitem__((11, "Sales"), "nan")),
     r"train\.csv.*Sales.*line 13"),
    ("a duplicated Id in test.csv", _edit("test.csv", lambda f: f.loc.__setitem__((5, "Id"), f.loc[4, "Id"])),
     r"test\.csv.*duplicated key"),
]

# broken-looking data the design accepts: the run ends with a forecast (the fewest epochs: the data is what matters)
QUICK = '{"epochs": 1}'
SUBMISSION = r"submission\.csv: test RMSPE"
GOOD_DATA_CASES = [
    ("a byte-order mark at the start of train.csv", _bom("train.csv")),
    ("Windows (CRLF) line ends in every file", _crlf),
    ("a store closed on every training day", _edit("train.csv", lambda f: _one_store(
        f, lambda t, rows: (t.loc.__setitem__((rows, "Open"), "0"), t.loc.__setitem__((rows, "Sales"), "0"),
                            t.loc.__setitem__((rows, "Customers"), "0"))))),
    ("a store with 10 rows in train.csv", _edit("train.csv", lambda f: _one_store(f, _keep_rows))),
    ("the data folder is a symbolic link", _symlinked),
    ("extra files and folders beside the data", _extra_files),
]
