"""Every fault and bad input we know of, run for real as a user would run it; writes docs/reliability.md.

    .venv/bin/python scripts/reliability.py            # all cases (about 15 minutes on 2 cores)
    .venv/bin/python scripts/reliability.py -k data    # the cases whose name contains "data"

Each case is a command (``pyflyte run workflows/rossmann.py wf ...`` on broken data or bad options, a Python
program that builds a bad setting, or one whose Horovod rank dies, freezes or raises). The table records the first
line of the error the user sees, how long the command took to fail, and whether the error is the one the design
promises (a pattern per case): a case whose command exits 0 or does not show its pattern is marked "no".
"""

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
DOC = ROOT / "docs" / "reliability.md"


@dataclass
class Case:
    name: str  # group/what
    what: str
    command: List[str]
    expect: str  # a regex the error line must match
    prepare: Optional[Callable[[Path], None]] = None  # breaks the copy of the data in this folder


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
    ("store.csv not CSV at all", _replace("store.csv", b"just some notes\nno columns here\n"), r"store\.csv.*column"),
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
]

# ---------------------------------------------------------------- ranks that fail: a program run as a user runs it
RANK_PROGRAM = '''
import os, signal, sys
from flytekitplugins.horovod import Horovod, HorovodRunner

def body(how):
    import horovod.tensorflow as hvd
    import tensorflow as tf
    hvd.allreduce(tf.constant(1.0))
    if hvd.rank() == 1:
        if how == "exit":
            os._exit(3)
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if how == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        if how == "raise":
            raise ValueError("rank one cannot go on")
        if how == "memory":
            raise MemoryError("no memory left for rank one")
        if how == "sys.exit":
            sys.exit(2)
    for _ in range(1000):
        hvd.allreduce(tf.constant(1.0))
    return hvd.rank()

route, how = sys.argv[1], sys.argv[2]
np_ = 2 if route == "spark" else -2
settings = Horovod(controller="mpi" if route == "mpi" else "gloo", lost_rank_timeout=10, start_timeout=10)
print("result", HorovodRunner(np=np_, settings=settings).run(body, how=how))
'''
RANK_CASES = [
    (route, how, expect)
    for how, expect in [("raise", r"Horovod rank 1 failed on host"), ("exit", r"Horovod rank 1 died on host"),
                        ("kill", r"Horovod rank 1 died on host"), ("stop", r"Horovod rank 1 was lost on host")]
    for route in ("gloo", "mpi", "spark")
] + [("gloo", "memory", r"Horovod rank 1 failed on host"), ("gloo", "sys.exit", r"Horovod rank 1 (failed|died) on")]


def cases(work: Path) -> List[Case]:
    found: List[Case] = []
    for what, prepare, expect in DATA_CASES:
        found.append(Case(f"data/{what}", what, _wf("--data_dir", DATA), expect, prepare))
    found.append(Case("data/a folder that does not exist", "a folder that does not exist",
                      _wf("--data_dir", str(work / "no-such-folder")), r"no-such-folder"))
    for hp, expect in HP_CASES:
        found.append(Case(f"options/--hp {hp}", f"`--hp '{hp}'`", _wf("--hp", hp), expect))
    imports = "from flytekitplugins.horovod import Horovod, HorovodRunner, HorovodSpark, MPIJob, Worker"
    for what, code, expect in SETTING_CASES:
        found.append(Case(f"settings/{what}", f"`{what}`", [sys.executable, "-c", f"{imports}\n{code}"], expect))
    program = work / "ranks.py"
    program.write_text(RANK_PROGRAM)
    for route, how, expect in RANK_CASES:
        what = f"rank 1 {'runs ' if how == 'raise' else ''}{how} ({route})"
        found.append(Case(f"ranks/{route}/{how}", what, [sys.executable, str(program), route, how], expect))
    return found


def run(case: Case, work: Path, good_data: Path, timeout: float = 600) -> Outcome:
    command = list(case.command)
    if case.prepare is not None or DATA in command:
        data = work / "data" / re.sub(r"\W+", "-", case.name)
        shutil.copytree(good_data, data)
        if case.prepare is not None:
            case.prepare(data)
        command = [str(data) if part == DATA else part for part in command]
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "COLUMNS": "400"}  # messages unwrapped
    started = time.monotonic()
    try:
        ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
        code, output = ran.returncode, ran.stdout + ran.stderr
    except subprocess.TimeoutExpired as exc:
        code, output = -1, f"timed out after {timeout:.0f} s\n{exc.stdout or ''}{exc.stderr or ''}"
    seconds = time.monotonic() - started
    pattern = re.compile(case.expect)
    output = output.replace(str(work), "<tmp>")
    # the text of rich's frames, without their borders and without the source lines of a framed traceback (the line
    # that raised would match too)
    lines = [text for text in (line.strip().strip("│").strip() for line in output.splitlines())
             if text and text[0] not in "╭╰" and "❱" not in text and not re.match(r"\d+\s*│", text)]
    line = next((l for l in lines if pattern.search(l)), None)
    ok = code != 0 and line is not None
    if line is None:  # what the user saw instead: the last line that looks like an error
        line = next((l for l in reversed(lines) if re.search(r"Error|error|Exception|failed", l)),
                    lines[-1] if lines else "(no output)")
    return Outcome(case, seconds, code, line, ok)


def _cell(text: str, limit: int = 180) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)  # colours of rich/click
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    return text.replace("|", "\\|").replace("`", "'")


def write(outcomes: List[Outcome], path: Path) -> None:
    rows = [f"| {i} | {o.case.name.split('/')[0]} | {o.case.what} | `{_cell(o.line)}` | {o.seconds:.1f} | "
            f"{'yes' if o.ok else 'no'} |" for i, o in enumerate(outcomes, 1)]
    good = sum(o.ok for o in outcomes)
    path.write_text(f"""# Reliability: every fault and bad input, as a user meets it

Generated by `scripts/reliability.py` from real runs ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores,
{platform.system()} {platform.machine()}, Python {platform.python_version()}): {good} of {len(outcomes)} cases fail
with the error the design promises. Each row is one command run as a user would run it: `pyflyte run
workflows/rossmann.py wf` on a broken copy of the synthetic data or with bad `--hp` options, a Python line that builds
a bad setting, or a `HorovodRunner` program whose rank 1 raises, exits, is killed, freezes (SIGSTOP, as a rank whose
host is gone looks) on local Gloo ranks, local `mpirun` ranks or Spark tasks (local mode). "seconds" is the whole
command, Python and Spark start-up included (a frozen rank is named after `lost_rank_timeout=10`). The first line of the error is the line the case looks for (or, when the case
fails, the last error-like line seen).

Faults that need several hosts (a pulled cable, a rank starting 10 s late) are run by `tests/multihost/` (see
`testing.md`), a killed rank with a retry that resumes by `tests/cluster/test_resume.py`, an elastic job losing a
worker by `tests/plugin/test_elastic.py`.

| # | kind | fault or bad input | first line of the error | seconds | as designed |
|---|---|---|---|---|---|
""" + "\n".join(rows) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="run only the cases whose name contains this")
    parser.add_argument("--out", default=str(DOC))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from rossmann import synthetic

    work = Path(tempfile.mkdtemp(prefix="reliability-"))
    try:
        good = work / "good-data"
        synthetic.generate(str(good), n_stores=50, start="2013-01-01", end="2015-07-31", seed=0)
        selected = [c for c in cases(work) if args.k in c.name]
        outcomes = []
        for i, case in enumerate(selected, 1):
            outcome = run(case, work, good)
            outcomes.append(outcome)
            print(f"[{i}/{len(selected)}] {case.name}: {'as designed' if outcome.ok else 'NOT AS DESIGNED'} in "
                  f"{outcome.seconds:.1f} s: {outcome.line[:160]}", flush=True)
        write(outcomes, Path(args.out))
        print(f"{sum(o.ok for o in outcomes)} of {len(outcomes)} as designed; written to {args.out}")
        return 0 if all(o.ok for o in outcomes) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
