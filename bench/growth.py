"""Cost as the work grows: ``pyflyte run workflows/rossmann.py wf`` on synthetic data of 50, 300 and 1,115 stores
(2013-01-01..2015-07-31, the same epochs for all three), one run each, as a user runs it.

Reports each task's wall time (its own ``[task] done in N s`` line) against the training rows, whether the task grows
linearly (its seconds per training row at the largest size against the smallest), and draws the figure
``docs/performance-growth.svg``. The baseline is the smallest run in the same script.

    .venv/bin/python -m bench.growth                   # 50, 300 and 1,115 stores at 10 epochs
    .venv/bin/python -m bench.growth --stores 50 300   # other sizes
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

from bench._common import CACHE, ROOT, header, load_average, machine, parser, save, table
from bench.full_size import run_wf

TASKS = ["get_data", "prepare", "train", "predict"]
FIGURE = ROOT / "docs" / "performance-growth.svg"


def draw(runs: List[Dict], path: Path) -> None:
    """Seconds per task (and the whole command) against training rows, on linear axes, with the straight line
    through the smallest run's point (linear growth from it) for the whole command."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "growth"  # stable element ids: a rerun changes only what it measured
    import matplotlib.pyplot as plt

    rows = [r["train_rows"] for r in runs]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name in TASKS:
        ax.plot(rows, [r["tasks_s"].get(name, 0.0) for r in runs], marker="o", label=f"task {name}")
    ax.plot(rows, [r["wall_s"] for r in runs], marker="s", color="black", label="whole pyflyte run")
    ax.plot(rows, [runs[0]["wall_s"] * n / rows[0] for n in rows], linestyle=":", color="grey",
            label="whole run, if linear from the smallest")
    ax.set_ylim(0, max(r["wall_s"] for r in runs) * 1.15)
    ax.set_xlabel("training rows (stores: " + ", ".join(str(r["n_stores"]) for r in runs) + ")")
    ax.set_ylabel("seconds")
    ax.set_title(f"Rossmann wf, {runs[0]['hp']['epochs']} epochs, 2 ranks, 2 cores")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", metadata={"Date": None})  # no timestamp: a rerun changes only what it measured
    plt.close(fig)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--stores", type=int, nargs="+", default=[50, 300, 1115], help="the sizes, smallest first")
    p.add_argument("--epochs", type=int, default=10, help="epochs of every run (the same for all)")
    p.add_argument("--figure", type=Path, default=FIGURE, help="where to write the SVG figure")
    opts = p.parse_args()
    header("Rossmann wf: wall time per task as the data grows", opts.quick)
    stores, epochs = ([4, 8], 1) if opts.quick else (sorted(opts.stores), opts.epochs)
    info, logs = machine(), CACHE
    logs.mkdir(parents=True, exist_ok=True)
    runs = []
    for n in stores:
        hp = {"n_stores": n, "epochs": epochs, **({"start": "2015-01-01"} if opts.quick else {})}
        run = {**run_wf(hp, logs / f"growth_{n}.log"), "n_stores": n, "load_average_after": round(load_average(), 2)}
        metrics = json.loads((Path(run["model"]) / "metrics.json").read_text())
        run["train_rows"] = metrics["train_rows"]
        runs.append(run)
    print(table(["stores", "training rows", *TASKS, "whole run", "test RMSPE / perfect"],
                [[r["n_stores"], r["train_rows"], *(r["tasks_s"].get(t, "") for t in TASKS), r["wall_s"],
                  f"{r['test_rmspe'] / r['test_perfect']:.3f}x" if "test_rmspe" in r else ""] for r in runs]))
    first, last = runs[0], runs[-1]
    growth = last["train_rows"] / first["train_rows"]
    for name in [*TASKS, "whole run"]:
        s0, s1 = ((r["wall_s"] if name == "whole run" else r["tasks_s"][name]) for r in (first, last))
        print(f"RATIO {name} {last['n_stores']} / {first['n_stores']} stores: {s1 / s0:.2f}x the seconds for "
              f"{growth:.1f}x the rows ({s1 / s0 / growth:.2f} of linear)")
    draw(runs, opts.figure)
    print(f"figure: {opts.figure}")
    save("growth", {"machine": info, "runs": [{k: v for k, v in r.items() if k != "output"} for r in runs]})


if __name__ == "__main__":
    main()
