"""Where a 2-rank PyTorch step's time goes, against DDP (issue 37): the body of bench/vs_ddp.py (the Rossmann model,
the same rows, batches and steps) with the gradient exchange taken apart, side by side, round-robin:

* ``apart``: 2 ranks (``torchrun``), each training on its part with no exchange: the compute of a step with the
  other rank beside it, the floor every 2-rank contestant stands on;
* ``gloo allreduce``: the gradients flattened into one buffer after ``backward`` and averaged by one
  ``torch.distributed.all_reduce`` over Gloo: the bare transport, no overlap with ``backward``;
* ``horovod allreduce``: the same buffer in one ``hvd.allreduce_`` (``horovodrun --gloo``): Horovod's background
  thread, negotiation and cycle around that transport, without ``DistributedOptimizer``'s per-gradient hooks;
* ``horovod grouped allreduce``: every gradient as it is, in one ``hvd.grouped_allreduce_`` after ``backward``:
  what ``DistributedOptimizer(groups=1)`` sends, without its hooks;
* ``horovod groups=1`` and ``horovod defaults``: ``hvd.DistributedOptimizer`` (hooks, handles, ``synchronize()``)
  with one grouped allreduce, and with Horovod's default of one allreduce per gradient;
* ``DDP``: ``DistributedDataParallel`` (its reducer's buckets, overlapped with ``backward``).

Each contestant's milliseconds per step, and what the exchange adds to ``apart``'s.

    .venv/bin/python -m bench.step_exchange            # 5 repetitions each, about 5 minutes
    .venv/bin/python -m bench.step_exchange --quick    # one short repetition each
"""

from __future__ import annotations

from typing import Dict, List

from bench._common import header, machine, median, parser, save, table
from bench.vs_ddp import MODELS, STEPS, commands, contestant_runs, prepared


def exchange_commands(model: str, steps: int) -> Dict[str, List[str]]:
    """The contestants' commands: vs_ddp's launchers, the body in each mode."""
    base = commands(prepared(False), MODELS[model], steps, 10)
    torchrun = base["DDP"][:-2]  # torchrun and the body's options, without its mode
    return {
        "apart": [*torchrun, "--mode", "apart"],
        "gloo allreduce": [*torchrun, "--mode", "gloo allreduce"],
        "horovod allreduce": [*base["horovod gloo"][:-2], "--mode", "horovod allreduce"],
        "horovod grouped allreduce": [*base["horovod gloo"][:-2], "--mode", "horovod grouped allreduce"],
        "horovod groups=1": [*base["horovod gloo"], "--groups", "1"],
        "horovod defaults": base["horovod gloo"],
        "DDP": base["DDP"],
    }


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--model", default="rossmann", choices=list(MODELS))
    p.add_argument("--steps", type=int, help="timed steps (default: vs_ddp's for the model)")
    args = p.parse_args()
    reps = args.reps or (1 if args.quick else 5)
    steps = 20 if args.quick else args.steps or STEPS[args.model]
    header(f"Where a 2-rank step's time goes ({args.model} model, {steps} steps)", args.quick)
    samples, runs = contestant_runs(exchange_commands(args.model, steps), reps)
    ms = {name: [1000 * run["seconds"] / run["steps"] for run in done] for name, done in runs.items()}
    floor, ddp = median(ms["apart"]), median(samples["DDP"])
    rows = [[name, f"{median(values):.2f}", f"{median(values) - floor:+.2f}", f"{median(samples[name]) / ddp:.2f}x",
             f"{median([r['final_loss'] for r in runs[name]]):.4f}", ", ".join(f"{v:.2f}" for v in values)]
            for name, values in ms.items()]
    print(table(["contestant", "ms per step (median)", "exchange (ms)", "vs DDP", "loss after the steps",
                 "each run (ms)"], rows))
    for name in ms:
        if name not in ("apart", "DDP"):
            print(f"RATIO {args.model}: {name} / DDP samples per second = {median(samples[name]) / ddp:.2f}x")
    results = {"machine": machine(), "reps": reps, "model": args.model, "steps": steps, "ms_per_step": ms,
               "samples_per_s": samples, "runs": runs}
    print(f"results: {save('step_exchange' + ('-quick' if args.quick else ''), results)}")


if __name__ == "__main__":
    main()
