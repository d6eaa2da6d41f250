"""Horovod against what users pick instead, PyTorch: the same model, rows, batches, optimizer, rate scaling and steps
(bench/_ddp_body.py), 2 ranks x 1 thread, side by side, round-robin:

* ``horovod gloo``: ``horovodrun --gloo`` running ``horovod.torch.DistributedOptimizer`` with ``groups=1``, as the
  project's recipe builds it (``rossmann.torch_train``; ``--groups 0`` for Horovod's one allreduce per gradient);
* ``horovod mpirun``: ``horovodrun --mpi`` (``mpirun``), the same body;
* ``MPIJob task``: the same body as an ``MPIJob`` task's, under ``pyflyte run`` with the plugin's defaults;
* ``DDP``: ``torchrun --standalone`` running ``DistributedDataParallel`` over Gloo;
* ``one process``: the global batch in one process on both cores.

For the Rossmann model at the default sizes (20 embeddings, 256-128, batch 512 per rank) and the reference example's
1000-1000-1000-500 network. Samples per second (both ranks' samples, steps after the warm-up only) and the loss
after the same steps (every contestant must train the same model, not just move bytes); RATIO lines of each Horovod
contestant against DDP.

    .venv/bin/python -m bench.vs_ddp            # 3 repetitions each, about 10 minutes on 2 cores
    .venv/bin/python -m bench.vs_ddp --quick    # one short repetition each, the Rossmann model only
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Tuple

from bench._common import CACHE, PYTHON, VENV_BIN, header, machine, median, parser, round_robin, save, table
from tests.support import ROOT, run_command

MODELS = {"rossmann": "256,128", "reference": "1000,1000,1000,500"}
STEPS = {"rossmann": 300, "reference": 60}  # a few seconds of training each at the speeds measured here
TASKS = "bench/_ddp_tasks.py"


def prepared(quick: bool) -> Path:
    """Prepared rows of the default data's shape (50 stores, about 44,000 training rows), written without Spark."""
    from tests.support.prepared import make_prepared

    path = CACHE / "data" / "ddp-prepared"
    if not (path / "metadata.json").exists():
        make_prepared(path, stores=50, train_days=880)
    return path


def commands(data: Path, hidden: str, steps: int, warmup: int, groups: int = 0) -> Dict[str, List[str]]:
    """Each contestant's command; the Horovod ones with ``DistributedOptimizer(groups=groups)`` (0: Horovod's
    default, one allreduce per gradient)."""
    body = ["-m", "bench._ddp_body", "--prepared", str(data), "--hidden", hidden, "--steps", str(steps),
            "--warmup", str(warmup)]
    grouped = ["--groups", str(groups)] if groups else []
    horovodrun = [str(VENV_BIN / "horovodrun"), "-np", "2", "-H", "localhost:2"]
    return {
        "horovod gloo": [*horovodrun, "--gloo", PYTHON, *body, "--mode", "horovod", *grouped],
        "horovod mpirun": [*horovodrun, "--mpi", PYTHON, *body, "--mode", "horovod", *grouped],
        "MPIJob task": [str(VENV_BIN / "pyflyte"), "run", TASKS, "horovod_body", "--prepared", str(data),
                        "--hidden", hidden, "--steps", str(steps), "--warmup", str(warmup), *grouped],
        "DDP": [str(VENV_BIN / "torchrun"), "--standalone", "--nproc_per_node", "2", *body, "--mode", "ddp"],
        "one process": [PYTHON, *body, "--mode", "single", "--threads", "2"],
    }


def result_of(command: List[str]) -> Dict:
    ran = run_command(command, timeout=900, cwd=ROOT)
    found = [line for line in ran.output.splitlines() if "RESULT {" in line]
    if ran.returncode != 0 or not found:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed ({ran.returncode}):\n{ran.output[-3000:]}")
    # the object only: a launcher may put another process's output on the same line after it
    return json.JSONDecoder().raw_decode(found[-1].split("RESULT ", 1)[1])[0]


def contestant_runs(commands: Dict[str, List[str]], reps: int) -> Tuple[Dict[str, List[float]], Dict[str, List[Dict]]]:
    """Each command run ``reps`` times, round-robin: (samples per second of each run, each run's result) by name."""
    runs: Dict[str, List[Dict]] = {}

    def contestant(name: str, command: List[str]):
        def measure() -> float:
            run = result_of(command)
            runs.setdefault(name, []).append(run)
            return run["samples_per_s"]
        return measure

    return round_robin({name: contestant(name, command) for name, command in commands.items()}, reps), runs


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, help="timed steps of every model (default: %s)" % STEPS)
    p.add_argument("--models", default=",".join(MODELS), help="which models, comma-separated (default: %(default)s)")
    p.add_argument("--contestants", help="which contestants, comma-separated (default: all; DDP is always run)")
    p.add_argument("--groups", type=int, default=1,
                   help="the Horovod contestants' DistributedOptimizer(groups=N) (default: %(default)s, the project's "
                        "recipe; 0: Horovod's default, one allreduce per gradient)")
    args = p.parse_args()
    reps = args.reps or (1 if args.quick else 3)
    header("Horovod vs torch DDP vs one process (PyTorch)", args.quick)
    data = prepared(args.quick)
    results: Dict[str, Dict] = {"machine": machine(), "reps": reps, "groups": args.groups, "models": {}}
    models = ["rossmann"] if args.quick else args.models.split(",")
    for model, hidden in ((name, MODELS[name]) for name in models):
        steps = 20 if args.quick else args.steps or STEPS[model]

        print(f"\n{model} model ({hidden}), {steps} steps after 10 warm-up steps, batch 512 per rank", flush=True)
        chosen = set(args.contestants.split(",")) | {"DDP"} if args.contestants else None
        samples, runs = contestant_runs({name: command for name, command
                                         in commands(data, hidden, steps, 10, args.groups).items()
                                         if chosen is None or name in chosen}, reps)
        ddp = median(samples["DDP"])
        rows = [[name, f"{median(values):,.0f}", f"{median(values) / ddp:.2f}x",
                 f"{median([r['final_loss'] for r in runs[name]]):.4f}", ", ".join(f"{v:,.0f}" for v in values)]
                for name, values in samples.items()]
        print(table(["contestant", "samples/s (median)", "vs DDP", "loss after the steps", "each run"], rows))
        for name in ("horovod gloo", "horovod mpirun", "MPIJob task"):
            if name in samples:
                print(f"RATIO {model}: {name} / DDP samples per second = {median(samples[name]) / ddp:.2f}x")
        if {"MPIJob task", "horovod gloo"} <= set(samples):
            print(f"RATIO {model}: MPIJob task / horovod gloo samples per second = "
                  f"{median(samples['MPIJob task']) / median(samples['horovod gloo']):.2f}x")
        results["models"][model] = {"hidden": hidden, "steps": steps, "samples_per_s": samples, "runs": runs}
    default = args.steps is None and args.contestants is None and args.groups == 1
    name = "vs_ddp" + ("-quick" if args.quick else "" if default else "-custom")
    print(f"results: {save(name, results)}")


if __name__ == "__main__":
    main()
