"""The seven Rossmann input files: names, columns and value types, as in the Kaggle / fast.ai originals."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """One CSV column. `kind` is int, float, date, str or week ("YYYY-MM-DD - YYYY-MM-DD")."""

    name: str
    kind: str = "str"
    nullable: bool = False
    allowed: tuple[str, ...] = ()  # allowed values of a str column (after trimming), empty = any
    bounds: tuple[float | None, float | None] | None = None  # inclusive (low, high) of a number column


@dataclass(frozen=True)
class Table:
    """One input file: `name` is the RawData attribute, `file` the file name, `key` its unique columns."""

    name: str
    file: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


FLAG = (0, 1)
NON_NEGATIVE = (0, None)
STATE_HOLIDAYS = ("0", "a", "b", "c")

TRAIN = Table("train", "train.csv", (
    Column("Store", "int"),
    Column("DayOfWeek", "int", bounds=(1, 7)),
    Column("Date", "date"),
    Column("Sales", "float", bounds=NON_NEGATIVE),
    Column("Customers", "float", bounds=NON_NEGATIVE),
    Column("Open", "int", bounds=FLAG),
    Column("Promo", "int", bounds=FLAG),
    Column("StateHoliday", "str", allowed=STATE_HOLIDAYS),
    Column("SchoolHoliday", "int", bounds=FLAG),
), key=("Store", "Date"))

TEST = Table("test", "test.csv", (
    Column("Id", "int"),
    Column("Store", "int"),
    Column("DayOfWeek", "int", bounds=(1, 7)),
    Column("Date", "date"),
    Column("Open", "int", nullable=True, bounds=FLAG),
    Column("Promo", "int", bounds=FLAG),
    Column("StateHoliday", "str", allowed=STATE_HOLIDAYS),
    Column("SchoolHoliday", "int", bounds=FLAG),
), key=("Id",))

STORE = Table("store", "store.csv", (
    Column("Store", "int"),
    Column("StoreType", "str"),
    Column("Assortment", "str"),
    Column("CompetitionDistance", "float", nullable=True, bounds=NON_NEGATIVE),
    Column("CompetitionOpenSinceMonth", "int", nullable=True, bounds=(1, 12)),
    Column("CompetitionOpenSinceYear", "int", nullable=True, bounds=(1800, 2100)),
    Column("Promo2", "int", bounds=FLAG),
    Column("Promo2SinceWeek", "int", nullable=True, bounds=(1, 53)),
    Column("Promo2SinceYear", "int", nullable=True, bounds=(1800, 2100)),
    Column("PromoInterval", "str", nullable=True),
), key=("Store",))

STORE_STATES = Table("store_states", "store_states.csv", (
    Column("Store", "int"),
    Column("State", "str"),
), key=("Store",))

STATE_NAMES = Table("state_names", "state_names.csv", (
    Column("StateName", "str"),
    Column("State", "str"),
), key=("StateName",))

GOOGLETREND = Table("googletrend", "googletrend.csv", (
    Column("file", "str"),
    Column("week", "week"),
    Column("trend", "float"),
), key=("file", "week"))

_WEATHER_NUMBERS = (
    "Max_TemperatureC", "Mean_TemperatureC", "Min_TemperatureC", "Dew_PointC", "MeanDew_PointC",
    "Min_DewpointC", "Max_Humidity", "Mean_Humidity", "Min_Humidity", "Max_Sea_Level_PressurehPa",
    "Mean_Sea_Level_PressurehPa", "Min_Sea_Level_PressurehPa", "Max_VisibilityKm", "Mean_VisibilityKm",
    "Min_VisibilitykM", "Max_Wind_SpeedKm_h", "Mean_Wind_SpeedKm_h", "Max_Gust_SpeedKm_h",
    "Precipitationmm", "CloudCover",
)
WEATHER = Table("weather", "weather.csv", (
    Column("file", "str"),
    Column("Date", "date"),
    *(Column(n, "float", nullable=True) for n in _WEATHER_NUMBERS),
    Column("Events", "str", nullable=True),
    Column("WindDirDegrees", "float", nullable=True),
), key=("file", "Date"))

TABLES: tuple[Table, ...] = (TRAIN, TEST, STORE, STORE_STATES, STATE_NAMES, GOOGLETREND, WEATHER)
