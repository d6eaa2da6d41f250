"""The command line of a one-process benchmark contestant (bench/_ddp_body.py, bench/_keras_body.py): the same
options for every framework, and rank 0's ``RESULT {json}`` line, which the comparison scripts read."""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Dict, Sequence


def run(description: str, modes: Sequence[str], train: Callable[..., Dict[str, Any]]) -> None:
    """Parse the options, ``train(mode, prepared, hidden, batch, steps, warmup, threads, groups)``, print rank 0's
    result."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--mode", choices=list(modes), required=True)
    p.add_argument("--prepared", required=True)
    p.add_argument("--hidden", default="256,128")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--groups", type=int, default=0,
                   help="Horovod's DistributedOptimizer(groups=N): 0 (unset, Horovod's default) allreduces each "
                        "gradient as it is ready, N in N grouped allreduces")
    args = p.parse_args()
    result = train(args.mode, args.prepared, [int(h) for h in args.hidden.split(",")], args.batch, args.steps,
                   args.warmup, args.threads, args.groups)
    if result["rank"] == 0:
        print("RESULT " + json.dumps(result), flush=True)
