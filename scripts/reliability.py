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
from typing import List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.reliability_cases import Case, cases  # noqa: E402  (the repository's root is on sys.path)
from scripts.reliability_data import DATA  # noqa: E402
from tests.support import ROOT, leftovers, user_env  # noqa: E402

DOC = ROOT / "docs" / "reliability.md"


@dataclass
class Outcome:
    case: Case
    seconds: float
    code: int
    line: str
    ok: bool


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
    runs = (f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores,\n{platform.system()} {platform.machine()}, "
            f"Python {platform.python_version()}")
    if all_cases is not None:  # the rows kept are from the last full run; say which rows ran now
        last_full = re.search(r"from real runs \(([^;)]*)", path.read_text())
        rerun = [str(i) for i, cells in enumerate(table, 1) if cells in fresh.values()]
        runs = (f"{last_full.group(1) if last_full else 'an earlier run'};\nrows {', '.join(rerun)} re-run with "
                f"`--merge` on {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}")
    path.write_text(f"""# Reliability: every fault and bad input, as a user meets it

Generated by `scripts/reliability.py` from real runs ({runs}): {good} of {len(table)} cases behave
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
`tests/support/attacks.py`; on a cluster, a process in another host of `tests/multihost`'s network namespaces; see
`security.md`): the design is a job that finishes unharmed, and the row says what
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
