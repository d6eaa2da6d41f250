"""Every fault and bad input we know of, run for real as a user would run it; writes docs/reliability.md.

    .venv/bin/python scripts/reliability.py            # all cases (about 15 minutes on 2 cores)
    .venv/bin/python scripts/reliability.py -k data    # the cases whose name contains "data" (no table written)
    .venv/bin/python scripts/reliability.py -k stall --merge   # re-run those, keep every other row of the table

Each case is a command (``pyflyte run workflows/rossmann.py wf ...`` on broken data or bad options, a Python
program that builds a bad setting, or one whose Horovod rank dies, freezes or raises), some of them stopped by the user
(Ctrl-C, ``kill -9``) or run on a full disk (a tmpfs of 256 KB or 1 MB as TMPDIR, so root only). The table records the first line
of the error the user sees, how long the command took to fail, and whether the outcome is the one the design promises
(a pattern per case, an exit code, and no process of the case left running): anything else is marked "no".
"""

import argparse
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support import ROOT, VENV_BIN, leftovers, user_env  # noqa: E402  (the repository's root is on sys.path)

DOC = ROOT / "docs" / "reliability.md"


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


@dataclass
class Outcome:
    case: Case
    seconds: float
    code: int
    line: str
    ok: bool


# ---------------------------------------------------------------- broken data: wf --data_dir <copy of good data>
def _edit(file: str, change) -> Callable[[Path], None]:
    def apply(data: Path) -> None:
        frame = pd.read_csv(data / file, dtype=str, keep_default_na=False)
        change(frame)
        frame.to_csv(data / file, index=False)
    return apply


def _append_byte(file: str, line: int, field: int, byte: bytes) -> Callable[[Path], None]:
    def apply(data: Path) -> None:
        lines = (data / file).read_bytes().split(b"\n")
        cells = lines[line - 1].split(b",")
        cells[field] += byte
        lines[line - 1] = b",".join(cells)
        (data / file).write_bytes(b"\n".join(lines))
    return apply


def _replace(file: str, content: bytes) -> Callable[[Path], None]:
    return lambda data: (data / file).write_bytes(content)


def _remove(file: str) -> Callable[[Path], None]:
    return lambda data: (data / file).unlink()


def _bom(file: str) -> Callable[[Path], None]:
    return lambda data: (data / file).write_bytes(b"\xef\xbb\xbf" + (data / file).read_bytes())


def _crlf(data: Path) -> None:
    for file in data.glob("*.csv"):
        file.write_bytes(file.read_bytes().replace(b"\n", b"\r\n"))


def _separated_by(file: str, separator: str) -> Callable[[Path], None]:
    def apply(data: Path) -> None:
        frame = pd.read_csv(data / file, dtype=str, keep_default_na=False)
        frame.to_csv(data / file, sep=separator, index=False)
    return apply


def _one_store(train: "pd.DataFrame", change) -> None:
    """Applies ``change`` to the rows of the first store of train.csv (a frame of strings)."""
    rows = train["Store"] == train["Store"].iloc[0]
    change(train, rows)


def _keep_rows(train: "pd.DataFrame", rows, count: int = 10) -> None:
    train.drop(train.index[rows][count:], inplace=True)


def _symlinked(data: Path) -> None:
    real = data.with_name(data.name + "-real")
    data.rename(real)
    data.symlink_to(real, target_is_directory=True)


def _extra_files(data: Path) -> None:
    (data / "README.txt").write_text("notes about these files\n")
    (data / ".DS_Store").write_bytes(bytes(range(64)))
    (data / "old").mkdir()
    shutil.copy(data / "store.csv", data / "old" / "store.csv")
    shutil.copy(data / "train.csv", data / "train.csv.bak")


def _wf(*args: str) -> List[str]:
    return [str(VENV_BIN / "pyflyte"), "run", "workflows/rossmann.py", "wf", *args]


DATA = "{data}"  # replaced by the case's folder
DATA_CASES = [
    ("missing weather.csv", _remove("weather.csv"), r"weather\.csv: missing file"),
    ("a misspelt column in store.csv", _edit("store.csv", lambda f: f.rename(
        columns={"CompetitionDistance": "CompetitionDistnace"}, inplace=True)), r"missing column.*misspelt"),
    ("train.csv with a header only", _edit("train.csv", lambda f: f.drop(f.index, inplace=True)), r"empty table"),
    ("an unparsable date in train.csv", _edit("train.csv", lambda f: f.loc.__setitem__((41, "Date"), "2015-13-01")),
     r"unparsable date .*line 43"),
    ("a negative sale in train.csv", _edit("train.csv", lambda f: f.loc.__setitem__((7, "Sales"), "-250")),
     r"negative value.*line 9"),
    ("a test store absent from store.csv", _edit("test.csv", lambda f: f.loc.__setitem__((3, "Store"), "777")),
     r"stores absent from .*store\.csv: 777"),
    ("a duplicated row in train.csv", _edit("train.csv", lambda f: f.loc.__setitem__(len(f), f.iloc[5])),
     r"duplicated key"),
    ("a Latin-1 byte in store.csv", _append_byte("store.csv", 3, 1, "\u00e4".encode("latin-1")),
     r"store\.csv.*not UTF-8 text: byte 0xe4 at line 3"),
    ("one bad byte on line 2001 of train.csv", _append_byte("train.csv", 2001, 0, b"\xff"),
     r"train\.csv.*not UTF-8 text: byte 0xff at line 2001"),
    ("an image instead of weather.csv", _replace("weather.csv", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40),
     r"weather\.csv: not UTF-8 text"),
    ("test dates inside the training period", _edit("test.csv", lambda f: f.__setitem__("Date", (pd.to_datetime(
        f["Date"]) - pd.Timedelta(days=20)).dt.strftime("%Y-%m-%d"))), r"test\.csv: column 'Date': dates overlap"),
    ("store.csv not CSV at all", _replace("store.csv", b"just some notes\nno columns here\n"), r"store\.csv.*column"),
    ("store.csv separated by ';'", _separated_by("store.csv", ";"), r"store\.csv.*separated by ';'"),
    ("an empty Sales value in train.csv", _edit("train.csv", lambda f: f.loc.__setitem__((11, "Sales"), "")),
     r"train\.csv.*Sales.*line 13"),
    ("a 'nan' Sales value in train.csv", _edit("train.csv", lambda f: f.loc.__setitem__((11, "Sales"), "nan")),
     r"train\.csv.*Sales.*line 13"),
    ("a duplicated Id in test.csv", _edit("test.csv", lambda f: f.loc.__setitem__((5, "Id"), f.loc[4, "Id"])),
     r"test\.csv.*duplicated key"),
]

# broken-looking data the design accepts: the run ends with a forecast (the fewest epochs: the data is what matters)
QUICK = '{"epochs": 1}'
SUBMISSION = r"submission\.csv: test RMSPE"
GOOD_DATA_CASES = [
    ("a byte-order mark at the start of train.csv", _bom("train.csv")),
    ("Windows (CRLF) line ends in every file", _crlf),
    ("a store closed on every training day", _edit("train.csv", lambda f: _one_store(
        f, lambda t, rows: (t.loc.__setitem__((rows, "Open"), "0"), t.loc.__setitem__((rows, "Sales"), "0"),
                            t.loc.__setitem__((rows, "Customers"), "0"))))),
    ("a store with 10 rows in train.csv", _edit("train.csv", lambda f: _one_store(f, _keep_rows))),
    ("the data folder is a symbolic link", _symlinked),
    ("extra files and folders beside the data", _extra_files),
]

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
     "rendezvous (it ran as root before) and GET the workers' keys (served before)"),
    ("gloo", "another local user PUTs junk to local Gloo ranks' key-value store (`/global/0`: it aborted `hvd.init` "
     "before), GETs and DELETEs keys"),
    ("liveness", "junk (it stopped the check before), a fake rank's hello (reported lost: `RankLostError` before), a "
     "forged proof and 20 silent connections sent to rank 0's liveness port"),
    ("mpirun", "a line of junk (`1 attacker-box`), kept open, to every port a local `mpirun` job listens on, from each "
     "of this host's addresses (two such connections hung the job before), and whether a canary variable or the "
     "job's secret is on a command line"),
    ("spark", "a bogus Spark slot plan PUT without the job's secret (the first plan won before), and another local "
     "user's plan and junk, on a local Spark session's ranks"),
]
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
from tests.cluster.backend import Attempt, mpi_launcher, package
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
     _wf("--data_dir", DATA), r"^InterruptedByUser: ", (r"\[prepare\] started", 5, "ctrl-c")),
    ("ctrl-c/while the ranks train", "Ctrl-C while the ranks train (seconds: after Ctrl-C)",
     _wf("--data_dir", DATA), r"^InterruptedByUser: ", (r"\[train\] started", 25, "ctrl-c")),
    ("kill/pyflyte while the ranks train", "`kill -9` of `pyflyte` while the ranks train (seconds: until none of "
     "its processes runs)", _wf("--data_dir", DATA), r"every process of the run ended", (r"\[train\] started", 25, "kill -9")),
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
        found.append(Case(f"data/{what}", what, _wf("--data_dir", DATA), expect, prepare))
    found.append(Case("data/a folder that does not exist", "a folder that does not exist",
                      _wf("--data_dir", str(work / "no-such-folder")), r"no-such-folder"))
    for what, prepare in GOOD_DATA_CASES:
        found.append(Case(f"accepted/{what}", what, _wf("--data_dir", DATA, "--hp", QUICK), SUBMISSION, prepare,
                          succeeds=True))
    for hp, expect in HP_CASES:
        found.append(Case(f"options/--hp {hp}", f"`--hp '{hp}'`", _wf("--hp", hp), expect))
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
    for name, what, command, expect, *signal_after in RUN_CASES:
        found.append(Case(name, what, command, expect, signal_after=signal_after[0] if signal_after else None))
    return found


def _until_none_left(marker: str, timeout: float) -> List[int]:
    deadline = time.monotonic() + timeout
    while leftovers(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    return leftovers(marker)


def _full_disk(work: Path, name: str, size: str) -> Path:
    disk = work / "disk" / name
    disk.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], check=True)
    return disk


def _signalled(command: List[str], marker: str, after: Tuple[str, float, str],
               timeout: float) -> Tuple[int, str, float]:
    """Runs ``command`` in its own process group (a shell's foreground job), sends the signal a while after a line of
    its output matches; returns (exit code, output, seconds from the signal until the run, or for ``kill -9`` every process
    of it, ended)."""
    pattern, wait, how = after
    proc = subprocess.Popen(command, cwd=ROOT, env=user_env({marker: "1"}), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL, start_new_session=True)
    lines: List[str] = []
    deadline = time.monotonic() + timeout
    try:
        for line in proc.stdout:
            lines.append(line)
            if re.search(pattern, line) or time.monotonic() > deadline:
                break
        time.sleep(wait)  # the output meanwhile waits in the pipe
        started = time.monotonic()
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C goes to the whole foreground group
            lines += proc.stdout.readlines()
            code = proc.wait(timeout=120)
            return code, "".join(lines), time.monotonic() - started
        proc.kill()  # kill -9 of pyflyte alone: its ranks and Spark must notice by themselves
        proc.wait(timeout=10)
        left = _until_none_left(marker, 120)
        seconds = time.monotonic() - started
        lines.append(f"{len(left)} processes of the run still run 120 s after kill -9 of pyflyte\n" if left else
                     f"pyflyte killed by SIGKILL: every process of the run ended {seconds:.1f} s later\n")
        return -9, "".join(lines), seconds
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def run(case: Case, work: Path, good_data: Path, timeout: float = 600) -> Outcome:
    command, disk = list(case.command), None
    folder = re.sub(r"\W+", "-", case.name)
    if case.prepare is not None or any(DATA in part for part in command):
        data = work / "data" / folder
        shutil.copytree(good_data, data)
        if case.prepare is not None:
            case.prepare(data)
        command = [part.replace(DATA, str(data)) for part in command]
    tmpfs = next((m for m in map(re.compile(r"\{tmpfs-(\w+)\}").search, command) if m), None)
    if tmpfs:
        disk = _full_disk(work, folder, tmpfs.group(1))
        command = [part.replace(tmpfs.group(0), str(disk)) for part in command]
    marker = f"HVD_RELIABILITY_{uuid.uuid4().hex}"  # finds every process of the case, whoever started it
    env = user_env({marker: "1"})
    started = time.monotonic()
    try:
        if case.signal_after is not None:
            code, output, seconds = _signalled(command, marker, case.signal_after, timeout)
        else:
            ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
                                 stdin=subprocess.DEVNULL)
            code, output, seconds = ran.returncode, ran.stdout + ran.stderr, time.monotonic() - started
    except subprocess.TimeoutExpired as exc:
        code, output = -1, f"timed out after {timeout:.0f} s\n{exc.stdout or ''}{exc.stderr or ''}"
        seconds = time.monotonic() - started
    finally:
        if disk is not None:
            subprocess.run(["umount", "--lazy", str(disk)], check=False)
    left = _until_none_left(marker, 10)  # nothing of a case may outlive it (a frozen rank included)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pattern = re.compile(case.expect)
    output = output.replace(str(work), "<tmp>")
    # the text of rich's frames, without their borders and without the source lines of a framed traceback (the line
    # that raised would match too)
    lines = [text for text in (line.strip().strip("│").strip() for line in output.splitlines())
             if text and text[0] not in "╭╰" and "❱" not in text and not re.match(r"\d+\s*│", text)]
    # the error the user sees, before what a rank printed of it on its way ("[1]<stderr>:..." of horovodrun/mpirun)
    rank_said = re.compile(r"^\[\d+\]<std(out|err)>:")
    line = next((l for l in lines if pattern.search(l) and not rank_said.match(l)),
                next((l for l in lines if pattern.search(l)), None))
    ok = (code == 0) == case.succeeds and line is not None and not left
    if left:
        line = f"{len(left)} processes of the run left running 10 s after it ended"
    elif line is None:  # what the user saw instead: the last line that looks like an error
        line = next((l for l in reversed(lines) if re.search(r"Error|error|Exception|failed", l)),
                    lines[-1] if lines else "(no output)")
    return Outcome(case, seconds, code, line, ok)


def _cell(text: str, limit: int = 180) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # colours of rich/click
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    return text.replace("|", "\\|").replace("`", "'")


def _row(case: Case, line: str, seconds: str, ok: bool) -> Tuple[str, str, str, str, str]:
    return case.name.split('/')[0], case.what, f"`{_cell(line)}`", seconds, "yes" if ok else "no"


def _rows_of(path: Path) -> dict:
    """The table's rows now, by their "fault or bad input" cell: (kind, what, line, seconds, as designed)."""
    rows = {}
    for line in path.read_text().splitlines():
        if re.match(r"\| \d+ \|", line):
            cells = tuple(c.strip() for c in re.split(r"(?<!\\)\|", line)[2:-1])
            rows[cells[1]] = cells
    return rows


def write(outcomes: List[Outcome], path: Path, all_cases: Optional[List[Case]] = None) -> None:
    """Writes the table of ``outcomes``; with ``all_cases``, a row per case, the cases not run keeping their row."""
    fresh = {o.case.what: _row(o.case, o.line, f"{o.seconds:.1f}", o.ok) for o in outcomes}
    if all_cases is None:
        table = list(fresh.values())
    else:
        kept = _rows_of(path)
        missing = [c.what for c in all_cases if c.what not in fresh and c.what not in kept]
        if missing:
            raise SystemExit(f"--merge: no row yet for {missing}: run those cases too (-k)")
        table = [fresh.get(c.what) or kept[c.what] for c in all_cases]
    rows = [f"| {i} | " + " | ".join(cells) + " |" for i, cells in enumerate(table, 1)]
    good = sum(cells[-1] == "yes" for cells in table)
    path.write_text(f"""# Reliability: every fault and bad input, as a user meets it

Generated by `scripts/reliability.py` from real runs ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores,
{platform.system()} {platform.machine()}, Python {platform.python_version()}): {good} of {len(table)} cases behave
as designed. Each row is one command run as a user would run it: `pyflyte run workflows/rossmann.py wf` on a broken
copy of the synthetic data or with bad `--hp` options, a Python line that builds a bad setting or passes a value that
cannot be pickled, a `HorovodRunner` program whose rank 1 raises, exits, is killed, freezes (SIGSTOP, as a rank whose
host is gone looks) or raises after rank 0 has returned, on local Gloo ranks, local `mpirun` ranks or Spark tasks
(local mode); kind `stall`: ranks out of step (uneven batches, a rank stuck in its own code or before `hvd.init()`)
under `Horovod(stall_timeout=15, start_timeout=30)`, and ranks in step but slower than that, which must not fail; the
user pressing Ctrl-C or killing `pyflyte` with `kill -9` mid-run; a tmpfs of 256 KB or 1 MB as
TMPDIR (a full disk). Kind `accepted` is data that looks broken but is valid: the design is a run that ends with a forecast (one
epoch; the data is what matters), and its row shows the forecast's line. Kind `security` is an attack on a running
job by whoever lacks its secret (another local user, run as `nobody`, or a process not given it:
`tests/support/attacks.py`, see `security.md`): the design is a job that finishes unharmed, and the row says what
the attacker got. "seconds" is the whole command, Python and Spark start-up included (a frozen rank is named after `lost_rank_timeout=10`), except where the row says it counts
from Ctrl-C or `kill -9`. The first line of the error is the line the case looks for (or, when the case fails, the
last error-like line seen). No case may leave a process running: one that does is not as designed.

Faults that need several hosts (a pulled cable, a rank starting 10 s late) are run by `tests/multihost/` (see
`testing.md`), a killed rank with a retry that resumes by `tests/cluster/test_resume.py`, an elastic job losing a
worker by `tests/plugin/test_elastic.py`, a previous attempt's checkpoint that cannot be read by
`tests/rossmann/test_train.py` and `tests/rossmann/test_torch_train.py`, the attribution of a dying rank 20 times
with the other core busy by `tests/plugin/test_attribution.py`.

| # | kind | fault or bad input | first line of the error | seconds | as designed |
|---|---|---|---|---|---|
""" + "\n".join(rows) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", action="append", default=[], help="run only the cases whose name contains this "
                        "(repeat it for several)")
    parser.add_argument("--merge", action="store_true", help="with -k: write the cases run into the table, keeping "
                        "the other rows as they are (a case with no row yet must be run)")
    parser.add_argument("--out", help=f"where the table goes (default: {DOC.relative_to(ROOT)}, but with -k nowhere: "
                        "a part of the cases is not the table)")
    args = parser.parse_args()
    from rossmann import synthetic

    work = Path(tempfile.mkdtemp(prefix="reliability-"))
    try:
        good = work / "good-data"
        synthetic.generate(str(good), n_stores=50, start="2013-01-01", end="2015-07-31", seed=0)
        every = cases(work)
        selected = [c for c in every if not args.k or any(k in c.name for k in args.k)]
        outcomes = []
        for i, case in enumerate(selected, 1):
            outcome = run(case, work, good)
            outcomes.append(outcome)
            print(f"[{i}/{len(selected)}] {case.name}: {'as designed' if outcome.ok else 'NOT AS DESIGNED'} in "
                  f"{outcome.seconds:.1f} s: {outcome.line[:160]}", flush=True)
        out = args.out or (None if args.k and not args.merge else str(DOC))
        if out:
            write(outcomes, Path(out), every if args.merge else None)
        print(f"{sum(o.ok for o in outcomes)} of {len(outcomes)} as designed" + (f"; written to {out}" if out else ""))
        return 0 if all(o.ok for o in outcomes) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
