"""Where Horovod's PyTorch step loses to DDP's, one knob at a time (issue 37): the ``horovod gloo`` contestant of
bench/vs_ddp.py (the same body, rows, batches and steps) under each variant below, and DDP, side by side,
round-robin. A variant is Horovod's own environment settings (what ``Horovod(...)`` passes to every rank) or an
argument of ``hvd.DistributedOptimizer``:

* ``default``: Horovod 0.28.1's defaults (a background cycle of 1 ms, 128 MB fusion buffer, response cache on);
* ``groups=1``: the gradients as one grouped allreduce once the last is ready (DDP's one bucket, for a model
  this size); ``groups=2`` and ``groups=4``: in 2 or 4 groups, the later layers' (which backward makes first) sent
  while backward still makes the earlier ones', as DDP's first small bucket is;
* ``groups=1 + cycle 5 ms`` and ``+ cycle 0.5 ms``: both, fewer idle negotiations between steps or less wait
  for the next cycle after the last gradient;
* ``cycle 5 ms`` and ``cycle 0.2 ms``: ``HOROVOD_CYCLE_TIME``, how often the background thread negotiates and fuses;
* ``no response cache``: ``HOROVOD_CACHE_CAPACITY=0``, every tensor negotiated by rank 0 each cycle;
* ``no fusion``: ``HOROVOD_FUSION_THRESHOLD=0``, one Gloo allreduce per gradient.

With ``--timeline``, the default and ``groups=1`` runs once more each under Horovod's timeline: the collectives
per step and the seconds the run spent inside their negotiation or execution (bench/steps.py's reading).

    .venv/bin/python -m bench.horovod_knobs            # 3 repetitions each, the Rossmann model, about 6 minutes
    .venv/bin/python -m bench.horovod_knobs --quick    # one short repetition each
"""

from __future__ import annotations

import os
import tempfile
from typing import Dict, List, Tuple

from bench._common import header, machine, median, parser, save, table
from bench.steps import collectives
from bench.vs_ddp import MODELS, STEPS, commands, contestant_runs, prepared, result_of

VARIANTS: Dict[str, Tuple[Dict[str, str], List[str]]] = {  # name: (environment, body arguments)
    "default": ({}, []),
    "groups=1": ({}, ["--groups", "1"]),
    "groups=2": ({}, ["--groups", "2"]),
    "groups=4": ({}, ["--groups", "4"]),
    "groups=1 + cycle 5 ms": ({"HOROVOD_CYCLE_TIME": "5"}, ["--groups", "1"]),
    "groups=1 + cycle 0.5 ms": ({"HOROVOD_CYCLE_TIME": "0.5"}, ["--groups", "1"]),
    "groups=1 + cycle 2 ms": ({"HOROVOD_CYCLE_TIME": "2"}, ["--groups", "1"]),
    "cycle 5 ms": ({"HOROVOD_CYCLE_TIME": "5"}, []),
    "cycle 0.2 ms": ({"HOROVOD_CYCLE_TIME": "0.2"}, []),
    "no response cache": ({"HOROVOD_CACHE_CAPACITY": "0"}, []),
    "no fusion": ({"HOROVOD_FUSION_THRESHOLD": "0"}, []),
}


def variant_commands(model: str, steps: int, chosen: List[str]) -> Dict[str, List[str]]:
    """``horovodrun --gloo`` under each chosen variant (its settings as ``env NAME=VALUE``), and DDP's command."""
    base = commands(prepared(False), MODELS[model], steps, 10)
    out = {}
    for name in chosen:
        env, args = VARIANTS[name]
        out[f"horovod {name}"] = ["env", *(f"{k}={v}" for k, v in env.items()), *base["horovod gloo"], *args]
    out["DDP"] = base["DDP"]
    return out


def timelines(model: str, steps: int) -> Dict[str, Dict]:
    """The default and ``groups=1`` once each under ``HOROVOD_TIMELINE``: collectives per step, and the share of
    the run inside their negotiation or execution."""
    read = {}
    with tempfile.TemporaryDirectory() as scratch:
        traced = variant_commands(model, steps, ["default", "groups=1"])
        del traced["DDP"]
        for name, command in traced.items():
            path = os.path.join(scratch, f"{len(read)}.json")
            run = result_of(["env", f"HOROVOD_TIMELINE={path}", *command])
            spent = collectives(path)
            per_step = {op: count / (steps + 10) for op, count in spent["counts"].items()}
            read[name] = {**spent, "per_step": per_step, "run": run}
            print(f"timeline {name}: {per_step['allreduce']:.1f} allreduces a step; of the {run['seconds']:.1f} s timed "
                  f"(and the start), {spent['negotiate_or_execute_s']:.1f} s inside a collective's negotiation or "
                  f"execution, {spent['execute_s']:.1f} s in execution", flush=True)
    return read


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--model", default="rossmann", choices=list(MODELS))
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated (default: all)")
    p.add_argument("--steps", type=int, help="timed steps (default: vs_ddp's for the model)")
    p.add_argument("--timeline", action="store_true", help="also read Horovod's timeline of two variants")
    args = p.parse_args()
    reps = args.reps or (1 if args.quick else 3)
    steps = 20 if args.quick else args.steps or STEPS[args.model]
    header(f"Horovod's settings against DDP ({args.model} model, {steps} steps)", args.quick)
    for name in {name for env, _ in VARIANTS.values() for name in env}:  # "default" is Horovod's, not this shell's
        os.environ.pop(name, None)
    samples, runs = contestant_runs(variant_commands(args.model, steps, args.variants.split(",")), reps)
    ddp = median(samples["DDP"])
    rows = [[name, f"{median(values):,.0f}", f"{median(values) / ddp:.2f}x",
             f"{median([r['final_loss'] for r in runs[name]]):.4f}", ", ".join(f"{v:,.0f}" for v in values)]
            for name, values in samples.items()]
    print(table(["contestant", "samples/s (median)", "vs DDP", "loss after the steps", "each run"], rows))
    for name, values in samples.items():
        if name != "DDP":
            print(f"RATIO {args.model}: {name} / DDP samples per second = {median(values) / ddp:.2f}x")
    results = {"machine": machine(), "reps": reps, "model": args.model, "steps": steps, "samples_per_s": samples,
               "runs": runs, "timelines": timelines(args.model, steps) if args.timeline else {}}
    print(f"results: {save('horovod_knobs' + ('-quick' if args.quick else ''), results)}")


if __name__ == "__main__":
    main()
