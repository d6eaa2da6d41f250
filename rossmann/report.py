"""Human-facing training report: curves as HTML (for a Flyte Deck) and RMSPE against the noise floor."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

SYNTHETIC_REPORT = "synthetic_report.json"  # written next to generated CSVs, carried into the prepared data


def save_synthetic_report(report: Any, data_dir: str | os.PathLike) -> Path:
    """Write a ``synthetic.SyntheticReport`` as JSON next to the CSV files it describes."""
    path = Path(data_dir) / SYNTHETIC_REPORT
    path.write_text(json.dumps(dataclasses.asdict(report), indent=1))
    return path


def carry_synthetic_report(data_dir: str | os.PathLike, prepared_dir: str | os.PathLike) -> None:
    """Copy the generator's report (if the data is synthetic) into the prepared data directory."""
    source = Path(data_dir) / SYNTHETIC_REPORT
    if source.exists():
        shutil.copy(source, Path(prepared_dir) / SYNTHETIC_REPORT)


def noise_floor(prepared_dir: str | os.PathLike) -> float | None:
    """The best RMSPE any model can get on this data's validation window (synthetic data only)."""
    path = Path(prepared_dir) / SYNTHETIC_REPORT
    return json.loads(path.read_text())["noise_floor_rmspe"] if path.exists() else None


def add_noise_floor(model_dir: str | os.PathLike, prepared_dir: str | os.PathLike) -> dict[str, Any]:
    """Record the noise floor (and the validation RMSPE's ratio to it) in the model's metrics.json."""
    path = Path(model_dir) / "metrics.json"
    metrics = json.loads(path.read_text())
    floor = noise_floor(prepared_dir)
    if floor is not None:
        metrics["noise_floor_rmspe"] = floor
        metrics["val_rmspe_over_noise_floor"] = metrics["val_rmspe"] / floor
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(metrics, indent=1))
        os.replace(tmp, path)
    return metrics


def summary(metrics: dict[str, Any]) -> str:
    """One line: validation RMSPE, and the noise floor when known."""
    line = f"validation RMSPE {metrics['val_rmspe']:.4f} after {metrics['epochs']} epochs on {metrics['ranks']} ranks"
    if "noise_floor_rmspe" in metrics:
        line += (f"; noise floor {metrics['noise_floor_rmspe']:.4f} "
                 f"({metrics['val_rmspe_over_noise_floor']:.2f}x the best possible)")
    return line


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
                ax.plot(range(1, len(values) + 1), values, style, label=(prefix or "train_").rstrip("_"))
        if name == "exp_rmspe" and metrics and "noise_floor_rmspe" in metrics:
            ax.axhline(metrics["noise_floor_rmspe"], color="grey", linestyle=":", label="noise floor")
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    img = base64.b64encode(buf.getvalue()).decode()
    caption = summary(metrics) if metrics else ""
    return f'<h3>Training curves</h3><p>{caption}</p><img src="data:image/png;base64,{img}"/>'


def load_training_outputs(model_dir: str | os.PathLike) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """history.json and metrics.json of a model directory."""
    model_dir = Path(model_dir)
    return json.loads((model_dir / "history.json").read_text()), json.loads((model_dir / "metrics.json").read_text())
