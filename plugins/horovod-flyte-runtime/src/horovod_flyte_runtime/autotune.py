"""How many steps Horovod's autotune needs before it writes its first configuration, and saying so when a run ended
sooner (an autotune log with only its header otherwise reads as autotune being broken).

Horovod 0.28.1 (horovod/common/parameter_manager.cc, .h): autotune scores a configuration over ``SAMPLES`` = 5
samples; a sample ends at a tensor's ``HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE`` + 1-th allreduce since the last (default
10), so a round takes 5 x steps + 1 allreduces of each tensor (one training step each). The first
``HOROVOD_AUTOTUNE_WARMUP_SAMPLES`` rounds (default 3) are warm-up and write nothing; the round after them writes the
first row. So the first row needs (warm-up + 1) x (5 x steps + 1) steps: 204 with Horovod's defaults. Tuning then goes
on for ``HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES`` (default 20) more rounds of the fusion threshold and cycle time.
"""

import csv
import os
from typing import Mapping, Optional

SAMPLES = 5  # parameter_manager.h: the samples a configuration's score is the median of
DEFAULTS = {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES": 3, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": 10}


def steps_to_first_row(environ: Mapping[str, str] = os.environ) -> int:
    """Training steps (allreduces of each tensor) before autotune writes its first configuration, with the warm-up and
    steps-per-sample settings of ``environ`` (Horovod's defaults where unset)."""
    warmups, steps = (int(environ.get(name) or default) for name, default in DEFAULTS.items())
    return (warmups + 1) * (SAMPLES * steps + 1)


def untried(path: Optional[str], environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """What to tell the user when the autotune log at ``path`` holds its header and no configuration; else None."""
    if not path or not os.path.exists(path):
        return None
    with open(path, newline="", encoding="utf-8") as f:
        rows = [row for row in csv.reader(f) if row]
    if len(rows) > 1:
        return None
    settings = ", ".join(f"{name}={environ.get(name) or default}" for name, default in DEFAULTS.items())
    return (f"autotune tried no configuration: the run ended before autotune's first, which needs about "
            f"{steps_to_first_row(environ)} training steps with {settings} (docs/mpi-route.md, Autotune); train "
            "longer, or set those variables lower in the task's environment (@task(environment=...)))")
