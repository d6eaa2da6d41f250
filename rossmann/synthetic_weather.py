"""The synthetic data's German states, and its weather.csv and googletrend.csv per state: a temperature with a yearly
wave and day-to-day persistence, weather events (one of them, TEST_ONLY_EVENT, only on a test day) and a weekly
Google trend."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rossmann.schema import WEATHER

# State code -> (weather / state name, share of stores, annual mean temperature C); the 12 with stores.
STORE_STATES_INFO = {
    "NW": ("NordrheinWestfalen", 0.255, 10.5), "BY": ("Bayern", 0.161, 8.5), "SH": ("SchleswigHolstein", 0.103, 9.0),
    "HE": ("Hessen", 0.100, 9.8), "BW": ("BadenWuerttemberg", 0.083, 9.5), "BE": ("Berlin", 0.083, 10.0),
    "TH": ("Thueringen", 0.074, 8.5), "SN": ("Sachsen", 0.067, 9.0), "HB,NI": ("Niedersachsen", 0.046, 9.5),
    "RP": ("RheinlandPfalz", 0.034, 10.0), "ST": ("SachsenAnhalt", 0.025, 9.3), "HH": ("Hamburg", 0.025, 9.6),
}
OTHER_STATES = {"BB": ("Brandenburg", 9.3), "HB": ("Bremen", 9.8), "MV": ("MecklenburgVorpommern", 8.8),
                "SL": ("Saarland", 9.9)}
TEST_ONLY_EVENT = "Rain-Hail-Thunderstorm"
EVENT_EFFECTS = {"Fog": -0.02, "Rain": -0.04, "Snow": -0.10, "Thunderstorm": -0.03}


def weather_csv(rng: np.random.Generator, dates: pd.DatetimeIndex, test_event: tuple[str, int]
                ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """weather.csv for all 16 states; Mean_TemperatureC and the Events effect for the 12 store states.
    `test_event` (state name, day) gets TEST_ONLY_EVENT."""
    names = [(v[0], v[2]) for v in STORE_STATES_INFO.values()] + list(OTHER_STATES.values())
    n, nd = len(names), len(dates)
    doy = dates.dayofyear.to_numpy()
    mean_t = np.array([m for _, m in names])[:, None] + 9.0 * np.sin(2 * np.pi * (doy - 110) / 365.25)[None, :]
    anomaly = np.zeros((n, nd))
    shocks = rng.normal(0, 2.2, (n, nd))
    for k in range(1, nd):
        anomaly[:, k] = 0.8 * anomaly[:, k - 1] + shocks[:, k]
    temp = np.round(mean_t + anomaly)
    spread = rng.integers(3, 8, (n, nd))
    precip = np.where(rng.random((n, nd)) < 0.38, np.round(rng.exponential(3.5, (n, nd)), 2), 0.0)
    flags = {"Fog": rng.random((n, nd)) < np.where(np.isin(dates.month.to_numpy(), [10, 11, 12, 1]), 0.12, 0.03),
             "Rain": precip > 0.3, "Snow": (precip > 0.3) & (temp < 1), "Hail": np.zeros((n, nd), dtype=bool)}
    flags["Thunderstorm"] = flags["Rain"] & (temp + spread > 22) & (rng.random((n, nd)) < 0.3)
    i, k = [nm for nm, _ in names].index(test_event[0]), test_event[1]
    precip[i, k] = 14.2
    for name in flags:
        flags[name][i, k] = name in TEST_ONLY_EVENT.split("-")
    events = np.full((n, nd), "", dtype=object)
    for name in ("Fog", "Rain", "Snow", "Hail", "Thunderstorm"):
        events = np.where(flags[name], np.where(events == "", name, events + "-" + name), events)
    effect = sum(value * flags[name] for name, value in EVENT_EFFECTS.items())
    humid = np.clip(np.round(85 - 1.2 * (temp - 9) + rng.normal(0, 6, (n, nd))), 30, 100)
    pressure = np.round(1015 + rng.normal(0, 7, (n, nd)))
    wind = np.round(rng.gamma(3.0, 4.0, (n, nd)))
    fog = flags["Fog"]
    columns = {
        "file": np.repeat([nm for nm, _ in names], nd),
        "Date": np.tile(dates.strftime("%Y-%m-%d").to_numpy(), n),
        "Max_TemperatureC": temp + spread, "Mean_TemperatureC": temp, "Min_TemperatureC": temp - spread,
        "Dew_PointC": temp - 2, "MeanDew_PointC": temp - 4, "Min_DewpointC": temp - 7,
        "Max_Humidity": np.minimum(humid + 12, 100), "Mean_Humidity": humid, "Min_Humidity": np.maximum(humid - 25, 10),
        "Max_Sea_Level_PressurehPa": pressure + 4, "Mean_Sea_Level_PressurehPa": pressure,
        "Min_Sea_Level_PressurehPa": pressure - 4,
        "Max_VisibilityKm": np.where(rng.random((n, nd)) < 0.02, np.nan, 31.0),
        "Mean_VisibilityKm": np.where(fog, 4.0, np.round(rng.uniform(8, 20, (n, nd)))),
        "Min_VisibilitykM": np.where(fog, 0.0, np.round(rng.uniform(2, 8, (n, nd)))),
        "Max_Wind_SpeedKm_h": wind + 10, "Mean_Wind_SpeedKm_h": wind,
        "Max_Gust_SpeedKm_h": np.where(rng.random((n, nd)) < 0.75, np.nan, wind + 25),
        "Precipitationmm": precip,
        "CloudCover": np.where(rng.random((n, nd)) < 0.05, np.nan,
                               np.clip(np.round((precip > 0) * 5 + rng.normal(3, 2, (n, nd))), 0, 8)),
        "Events": np.where(events == "", None, events),
        "WindDirDegrees": rng.integers(0, 361, (n, nd)),
    }
    frame = pd.DataFrame({k: np.ravel(v) for k, v in columns.items()})
    for col in WEATHER.column_names:
        if col not in ("file", "Date", "Events", "Precipitationmm"):
            frame[col] = pd.array(frame[col].to_numpy(dtype="float64"), dtype="Int64")
    n_store_states = len(STORE_STATES_INFO)
    return frame, temp[:n_store_states], effect[:n_store_states]


def trends_csv(rng: np.random.Generator, dates: pd.DatetimeIndex) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """googletrend.csv (weeks Sunday..Saturday), and every day's trend per store state and for DE."""
    states = list(STORE_STATES_INFO)
    first = dates[0] - pd.Timedelta(days=(dates[0].dayofweek + 1) % 7)
    weeks = pd.date_range(first, dates[-1], freq="7D")
    nw = len(weeks)
    season = 8 * np.cos(2 * np.pi * (weeks.dayofyear.to_numpy() - 355) / 365.25)
    ar = np.zeros((len(states), nw))
    shocks = rng.normal(0, 4, (len(states), nw))
    for k in range(1, nw):
        ar[:, k] = 0.7 * ar[:, k - 1] + shocks[:, k]
    level = rng.uniform(50, 70, len(states))[:, None]
    by_state = np.clip(np.round(level + season[None, :] + ar), 0, 100)
    de = np.clip(np.round(by_state.mean(axis=0) + rng.normal(0, 2, nw)), 0, 100)
    labels = [f"{w:%Y-%m-%d} - {w + pd.Timedelta(days=6):%Y-%m-%d}" for w in weeks]
    files = ["Rossmann_DE_" + ("NI" if s == "HB,NI" else s) for s in states] + ["Rossmann_DE"]
    frame = pd.DataFrame({"file": np.repeat(files, nw), "week": labels * len(files),
                          "trend": np.concatenate([by_state.ravel(), de]).astype(int)})
    day_week = (dates - first).days.to_numpy() // 7
    return frame, by_state[:, day_week], de[day_week]
