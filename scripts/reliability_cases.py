"""The cases of scripts/reliability.py: every fault and bad input we know of, as the command a user runs, what breaks
before it runs, and the error line the design promises (a regex)."""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from scripts.reliability_data import DATA, DATA_CASES, GOOD_DATA_CASES, QUICK, SUBMISSION, wf_command
from tests.support import ROOT, VENV_BIN


@dataclass
class Case:
    name: str  # group/what
    what: str
    command: List[str]
    expect: str  # a regex the error line must match
    prepare: Optional[Callable[[Path], None]] = None  # breaks the copy of the data in this folder
    succeeds: bool = False  # the design is a run that ends well (exit 0) and prints a line matching `expect`
    # (a regex of the run's output, seconds to wait after it, "ctrl-c" or "kill -9"): the user stops the run
    signal_after: Optional[Tuple[str, float, str]] = None


# ---------------------------------------------------------------- bad options: wf --hp '...'
HP_CASES = [
    ('{"epoch": 3}', r"unknown.*'epoch'.*epochs"),
    ('{"epochs": 0}', r"epochs=0"),
    ('{"batch_size": 0}', r"batch_size=0"),
    ('{"learning_rate": -1}', r"learning_rate=-1"),
    ('{"ranks": 64}', r"rank count is the training tasks' config"),
    ('{"sample_rate": 1.5}', r"sample_rate=1\.5"),
    ('{"hidden": []}', r"hidden"),
    ('{"hidden": [64, -2]}', r"hidden"),
    ('{"start": "2015-07-01", "end": "2015-07-31"}', r"start.*end"),
    ('{"n_stores": 1}', r"n_stores=1"),
    ('{"epochs": "ten"}', r"epochs='ten'"),
    ("not json", r"JSON|json|Expecting value"),
]

# ---------------------------------------------------------------- bad settings, built in Python
SETTING_CASES = [
    ("MPIJob(worker=Worker(replicas=2.5))", "MPIJob(worker=Worker(replicas=2.5))", r"replicas=2\.5"),
    ('Horovod(controller="nccl")', 'Horovod(controller="nccl")', r"controller='nccl' is not one of"),
    ('Horovod(fp16_compression="zstd")', 'Horovod(fp16_compression="zstd")', r"fp16_compression='zstd' must be bool"),
    ('Horovod(hierarchical_allreduce="no")', 'Horovod(hierarchical_allreduce="no")', r"must be bool"),
    ("Horovod(cache_capacity=2.5)", "Horovod(cache_capacity=2.5)", r"cache_capacity=2\.5 must be int"),
    ("Horovod(lost_rank_timeout=0)", "Horovod(lost_rank_timeout=0)", r"lost_rank_timeout=0 must be positive"),
    ('Horovod(autotune_log_file="a.csv")', 'Horovod(autotune_log_file="a.csv")', r"autotune is off"),
    ("HorovodRunner(np='2')", "HorovodRunner(np='2')", r"np must be a whole number"),
    ("HorovodSpark(num_proc=0)", "HorovodSpark(num_proc=0)", r"num_proc"),
    ("a timeline in a missing folder", 'HorovodRunner(np=-2, settings=Horovod(timeline_filename="/no/such/dir/t.json"))'
     ".run(print)", r"the folder /no/such/dir does not exist"),
    ("an argument that cannot be pickled", 'HorovodRunner(np=-2).run(print, end=__import__("socket").socket())',
     r"HorovodConfigError: argument 'end' \(socket\.socket\) cannot be pickled.*must be picklable"),
    ("a result that cannot be pickled", 'HorovodRunner(np=-2).run(__import__("socket").socket)',
     r"rank 0's result \(socket\.socket\) cannot be pickled.*must be picklable"),
]

# ---------------------------------------------------------------- ranks that fail: a program run as a user runs it
ATTACKS = ROOT / "tests" / "support" / "attacks.py"  # attacks on running jobs, by whoever lacks the job's secret
SECURITY_CASES = [
    ("elastic", "another local user, and a process without the job's secret, PUT a pickle to a local elastic job's "
     "rendezvous (it ran as root before), GET the workers' keys (served before), PUT, GET, DELETE Gloo keys and "
     "`rank_and_size`"),
    ("gloo", "another local user, and a process without the job's secret, PUT junk to local Gloo ranks' key-value "
     "store (`/global/0`: it aborted `hvd.init` before), GET and DELETE keys, ask `HEAD /`"),
    ("liveness", "junk (it stopped the check before), a fake rank's hello (reported lost: `RankLostError` before), a "
     "forged proof and 20 silent connections sent to rank 0's liveness port"),
    ("mpirun", "a line of junk (`1 attacker-box`), kept open, to every port a local `mpirun` job listens on, from each "
     "of this host's addresses (two such connections hung the job before), and whether a canary variable or the "
     "job's secret is on a command line"),
    ("spark", "a bogus Spark slot plan PUT without the job's secret (the first plan won before), Gloo keys PUT, GET "
     "and DELETEd without it, and another local user's plan and junk, on a local Spark session's ranks"),
]
# the registered horovodrun --gloo and elastic launcher commands in host a, ranks in hosts b and c (network
# namespaces, as tests/multihost runs them), a process in host c without the job's secret at the rendezvous
CLUSTER_ATTACK = ("security/cluster", "a process in another host without the job's secret PUTs, GETs, DELETEs Gloo "
                  "keys (and `rank_and_size`, a worker's addresses) and asks `HEAD /` of the rendezvous of a cluster's "
                  "`horovodrun --gloo` and elastic launcher commands while they run (any pod could before); the first "
                  "of the two jobs' lines",
                  [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                   "tests/multihost/test_mpi_route.py", "-k", "gloo_2x1 or elastic_2x1"])
FAULTY_RANK = ROOT / "tests" / "support" / "faulty_rank.py"  # the tests' fault program, with the timeout of 10 s
RANK_CASES = [
    (route, how, expect)
    for how, expect in [("raise", r"Horovod rank 1 failed on host"), ("exit", r"Horovod rank 1 died on host"),
                        ("kill", r"Horovod rank 1 died on host"), ("stop", r"Horovod rank 1 was lost on host")]
    for route in ("gloo", "mpi", "spark")
] + [("gloo", "memory", r"Horovod rank 1 failed on host"), ("gloo", "sys.exit", r"Horovod rank 1 (failed|died) on")
     ] + [(route, "late-raise", r"Horovod rank 1 failed on host") for route in ("gloo", "mpi", "spark")]
RANK_WHAT = {"raise": "runs raise", "late-raise": "raises 3 s after rank 0 returned"}

# ---------------------------------------------------------------- ranks out of step: a program run as a user runs it
STALLED_RANK = ROOT / "tests" / "support" / "stalled_rank.py"  # stall_timeout=15, start_timeout=30
OUT_OF_STEP = r"^Horovod ranks out of step for more than 15 s .*rank 1 never submitted"
STALL_CASES = [
    ("gloo", "uneven-torch", "rank 1 has 3 more batches than rank 0, PyTorch", OUT_OF_STEP),
    ("mpi", "uneven-torch", "rank 1 has 3 more batches than rank 0, PyTorch", OUT_OF_STEP),
    ("spark", "uneven-torch", "rank 1 has 3 more batches than rank 0, PyTorch", OUT_OF_STEP),
    ("gloo", "uneven-keras", "rank 1 has 3 more batches than rank 0, Keras `fit`", OUT_OF_STEP),
    ("mpi", "uneven-keras", "rank 1 has 3 more batches than rank 0, Keras `fit`", OUT_OF_STEP),
    ("spark", "uneven-keras", "rank 1 has 3 more batches than rank 0, Keras `fit`", OUT_OF_STEP),
    ("gloo", "stuck", "rank 1 stuck in its own code, outside any collective", OUT_OF_STEP),
    ("mpi", "before-init", "rank 1 stuck before `hvd.init()`",
     r"^Horovod ranks never met: .*rank 1 on .* started but never reached it"),
    ("gloo", "before-init", "rank 1 stuck before `hvd.init()`",
     r"^Horovod ranks never met: .*rank 1 on .* started but never reached it"),
    ("gloo", "in-step", "both ranks compute 22 s between two allreduces, in step (no error)", r"^NO ERROR$"),
]
STALL_FLOWS = "tests/plugin/flows/stall_flows.py"  # pyflyte run: an MPIJob and an elastic HorovodJob, stall_timeout=15
STALL_RUNS = [
    ("uneven_batches", "`pyflyte run` of a 2-rank PyTorch `MPIJob` whose rank 1 has 3 more batches (gloo)"),
    ("elastic_out_of_step", "`pyflyte run` of an elastic `HorovodJob` whose rank 1 is stuck outside any collective"),
]

# ---------------------------------------------------------------- a retry whose previous attempt's checkpoint is broken
RETRY_PROGRAM = '''
"""The registered train_mpi task, run as propeller and the MPI operator run it: attempt 1 saves its checkpoint, its
weights file is then cut to half (a disk fault); the retry, given attempt 1's checkpoint, warns and trains afresh."""
import os, sys
from pathlib import Path
sys.path.insert(0, os.getcwd())
from flytekit.types.directory import FlyteDirectory
from tests.cluster.backend import Attempt, mpi_launcher
from tests.cluster.registration import package
from tests.support.prepared import make_prepared
from workflows.rossmann import Hyperparameters

work = Path(sys.argv[1])
(work / "package").mkdir(parents=True)
template = package("workflows", work / "package").task("workflows.rossmann.train_mpi")
prepared = make_prepared(work / "prepared")

def attempt(number, prev_checkpoint=None):
    run = Attempt(work / f"attempt-{number}", execution_id="retry0001", attempt=number, prev_checkpoint=prev_checkpoint)
    hp = Hyperparameters(epochs=2, batch_size=128, hidden=[32, 16])
    run.write_inputs(template, {"prepared": FlyteDirectory(str(prepared)), "hp": hp})
    ran = mpi_launcher(template, run, work, timeout=300)
    print(ran.output, flush=True)
    if ran.returncode or "error.pb" in os.listdir(run.output_prefix):
        sys.exit(f"attempt {number} failed")
    return run

first = attempt(0)
weights = next((first.checkpoint_prefix / "current").glob("last.data-*"))
os.truncate(weights, weights.stat().st_size // 2)
attempt(1, first.checkpoint_prefix)
'''
BROKEN_CHECKPOINT = r"the checkpoint \S+/current cannot be read \(\S+/last\.data\S*: \w+Error: .*\); training starts afresh"

# ---------------------------------------------------------------- the user stops the run, or the disk is full
PYFLYTE = str(VENV_BIN / "pyflyte")
TMPFS = "{tmpfs-1m}"  # replaced by a tmpfs of that size (a full disk) made for the case
TINY_TMPFS = "{tmpfs-256k}"  # smaller than the prepared data
PREPARED = f'prepared=$({PYFLYTE} run workflows/rossmann.py prepare --data {DATA} --hp "{{}}" | tail -1)'
RUN_CASES = [
    ("ctrl-c/while prepare runs", "Ctrl-C while `prepare` runs (seconds: after Ctrl-C)",
     wf_command("--data_dir", DATA), r"^InterruptedByUser: ", (r"\[prepare\] started", 5, "ctrl-c")),
    ("ctrl-c/while the ranks train", "Ctrl-C while the ranks train (seconds: after Ctrl-C)",
     wf_command("--data_dir", DATA), r"^InterruptedByUser: ", (r"\[train\] started", 25, "ctrl-c")),
    ("kill/pyflyte while the ranks train", "`kill -9` of `pyflyte` while the ranks train (seconds: until none of "
     "its processes runs)", wf_command("--data_dir", DATA), r"every process of the run ended",
     (r"\[train\] started", 25, "kill -9")),
    ("disk/full in prepare", "a full disk (256 KB TMPDIR) in `prepare`",
     ["env", f"TMPDIR={TINY_TMPFS}", PYFLYTE, "run", "workflows/rossmann.py", "prepare", "--data", DATA, "--hp", "{}"],
     r"No space left on device: <tmp>/\S+"),
    ("disk/full in train", "a full disk (1 MB TMPDIR) in `train`, after `prepare` on a roomy one",
     ["bash", "-c", f"{PREPARED} && TMPDIR={TMPFS} {PYFLYTE} run workflows/rossmann.py train --prepared "
      f"\"$prepared\" --hp '{{\"epochs\": 2}}'"], r"No space left on device: <tmp>/\S+"),
]


def cases(work: Path) -> List[Case]:
    found: List[Case] = []
    for what, prepare, expect in DATA_CASES:
        found.append(Case(f"data/{what}", what, wf_command("--data_dir", DATA), expect, prepare))
    found.append(Case("data/a folder that does not exist", "a folder that does not exist",
                      wf_command("--data_dir", str(work / "no-such-folder")), r"no-such-folder"))
    for what, prepare in GOOD_DATA_CASES:
        found.append(Case(f"accepted/{what}", what, wf_command("--data_dir", DATA, "--hp", QUICK), SUBMISSION, prepare,
                          succeeds=True))
    for hp, expect in HP_CASES:
        found.append(Case(f"options/--hp {hp}", f"`--hp '{hp}'`", wf_command("--hp", hp), expect))
    imports = "from flytekitplugins.horovod import Horovod, HorovodRunner, HorovodSpark, MPIJob, Worker"
    for what, code, expect in SETTING_CASES:
        found.append(Case(f"settings/{what}", f"`{what}`", [sys.executable, "-c", f"{imports}\n{code}"], expect))
    for route, how, expect in RANK_CASES:
        what = f"rank 1 {RANK_WHAT.get(how, how)} ({route})"
        command = [sys.executable, str(FAULTY_RANK), route, how, "--lost-rank-timeout", "10"]
        found.append(Case(f"ranks/{route}/{how}", what, command, expect))
    for route, how, what, expect in STALL_CASES:
        found.append(Case(f"stall/{route}/{how}", f"{what} ({route})", [sys.executable, str(STALLED_RANK), route, how],
                          expect, succeeds=how == "in-step"))
    for name, what in STALL_RUNS:
        found.append(Case(f"stall/pyflyte/{name}", what, ["env", f"PYTHONPATH={ROOT}", PYFLYTE, "run", STALL_FLOWS, name],
                          r"Horovod ranks out of step for more than 15 s \(stall_timeout\)"))
    retry = work / "retry.py"
    retry.write_text(RETRY_PROGRAM)
    found.append(Case("retry/a broken checkpoint", "a retry whose previous attempt's checkpoint has its weights file "
                      "cut to half (the registered `train_mpi` task)", [sys.executable, str(retry), str(work / "retry")],
                      BROKEN_CHECKPOINT, succeeds=True))
    for name, what in SECURITY_CASES:
        found.append(Case(f"security/{name}", what, [sys.executable, str(ATTACKS), name], r"^(no harm|HARM): ",
                          succeeds=True))
    found.append(Case(*CLUSTER_ATTACK, r"^(no harm|HARM): ", succeeds=True))
    for name, what, command, expect, *signal_after in RUN_CASES:
        found.append(Case(name, what, command, expect, signal_after=signal_after[0] if signal_after else None))
    return found
