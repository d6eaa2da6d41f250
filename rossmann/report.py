"""Human-facing training report: curves as HTML (for a Flyte Deck), and the backtest and test RMSPE next to
the perfect model's (synthetic data, whose generator knows the signal and the true test sales)."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

from rossmann.atomic import atomic_write
from rossmann.model_dir import METRICS
from rossmann.synthetic import TEST_TRUTH

SYNTHETIC_REPORT = "synthetic_report.json"  # written next to generated CSVs, carried into the prepared data


def save_synthetic_report(report: Any, data_dir: str | os.PathLike) -> Path:
    """Write a ``synthetic.SyntheticReport`` as JSON next to the CSV files it describes."""
    path = Path(data_dir) / SYNTHETIC_REPORT
    path.write_text(json.dumps(dataclasses.asdict(report), indent=1))
    return path


def carry_synthetic_files(data_dir: str | os.PathLike, prepared_dir: str | os.PathLike) -> None:
    """Copy the generator's report and test truth (if the data is synthetic) into the prepared data directory."""
    for name in (SYNTHETIC_REPORT, TEST_TRUTH):
        source = Path(data_dir) / name
        if source.exists():
            shutil.copy(source, Path(prepared_dir) / name)


def score_test(submission: Any, prepared_dir: str | os.PathLike) -> dict[str, float] | None:
    """RMSPE of a submission (a DataFrame Id, Sales) on the test period's open days with sales, and the perfect
    model's on the same rows; None when the true test sales are unknown (real data)."""
    import pandas as pd

    from rossmann.metrics import rmspe

    path = Path(prepared_dir) / TEST_TRUTH
    if not path.exists():
        return None
    truth = pd.read_csv(path)
    rows = truth.merge(submission, on="Id", how="left", suffixes=("", "_predicted"))
    rows = rows[rows["Sales"] > 0]
    if rows["Sales_predicted"].isna().any():
        raise ValueError(f"the submission lacks {int(rows['Sales_predicted'].isna().sum())} test Ids of {path}")
    return {"test_rmspe": rmspe(rows["Sales"], rows["Sales_predicted"]),
            "test_perfect_rmspe": rmspe(rows["Sales"], rows["PerfectSales"]), "test_rows_scored": len(rows)}


def add_scores(model_dir: str | os.PathLike, prepared_dir: str | os.PathLike,
               test_scores: dict[str, float] | None) -> dict[str, Any]:
    """Record in the model's metrics.json the perfect model's backtest RMSPE (synthetic data) and the test
    scores, each with its ratio to the perfect model's; return the metrics."""
    path = Path(model_dir) / METRICS
    metrics = json.loads(path.read_text())
    synthetic = Path(prepared_dir) / SYNTHETIC_REPORT
    if synthetic.exists():
        metrics["backtest_perfect_rmspe"] = json.loads(synthetic.read_text())["backtest_noise_floor_rmspe"]
        metrics["backtest_over_perfect"] = metrics["backtest_rmspe"] / metrics["backtest_perfect_rmspe"]
    if test_scores:
        metrics.update(test_scores)
        metrics["test_over_perfect"] = metrics["test_rmspe"] / metrics["test_perfect_rmspe"]
        metrics["backtest_over_test"] = metrics["backtest_rmspe"] / metrics["test_rmspe"]
    atomic_write(path, json.dumps(metrics, indent=1))
    return metrics


def summary(metrics: dict[str, Any]) -> str:
    """One line: the backtest RMSPE, the test RMSPE when the truth is known, each next to the perfect model's."""
    line = f"backtest RMSPE {metrics['backtest_rmspe']:.4f}"
    if "backtest_perfect_rmspe" in metrics:
        line += f" (perfect model {metrics['backtest_perfect_rmspe']:.4f}, {metrics['backtest_over_perfect']:.2f}x)"
    if "test_rmspe" in metrics:
        line += (f"; test RMSPE {metrics['test_rmspe']:.4f} (perfect model {metrics['test_perfect_rmspe']:.4f} on "
                 f"the same {metrics['test_rows_scored']} rows, {metrics['test_over_perfect']:.2f}x)")
    return (f"{line}; best of {metrics['epochs']} epochs: {metrics.get('best_epoch', metrics['epochs'])}, on "
            f"{metrics['ranks']} ranks in {metrics['seconds']:.0f} s")


def training_curves_html(history: dict[str, list[float]], metrics: dict[str, Any] | None = None) -> str:
    """Loss and RMSPE per epoch (train and validation) as an HTML page with an embedded PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, name, title in ((axes[0], "loss", "loss (MAE of log sales)"), (axes[1], "exp_rmspe", "RMSPE")):
        for prefix, style in (("", "-o"), ("val_", "--s")):
            values = history.get(prefix + name)
            if values:
                ax.plot(range(1, len(values) + 1), values, style, label="backtest" if prefix else "train")
        if name == "exp_rmspe" and metrics and "backtest_perfect_rmspe" in metrics:
            ax.axhline(metrics["backtest_perfect_rmspe"], color="grey", linestyle=":", label="perfect model")
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    img = base64.b64encode(buf.getvalue()).decode()
    caption = summary(metrics) if metrics else ""
    return (f'<h3>Training curves</h3><p>{caption}</p><img src="data:image/png;base64,{img}"/>'
            f"<h3>Per epoch</h3>{_epoch_table(history)}")


def _epoch_table(history: dict[str, list[float]]) -> str:
    columns = [k for k in ("loss", "val_loss", "exp_rmspe", "val_exp_rmspe") if k in history]
    names = {"loss": "loss", "val_loss": "backtest loss", "exp_rmspe": "train RMSPE", "val_exp_rmspe": "backtest RMSPE"}
    head = "".join(f"<th>{names[c]}</th>" for c in columns)
    rows = "".join(f"<tr><td>{i + 1}</td>" + "".join(f"<td>{history[c][i]:.4f}</td>" for c in columns) + "</tr>"
                   for i in range(len(history.get("loss", []))))
    return f"<table><tr><th>epoch</th>{head}</tr>{rows}</table>"

