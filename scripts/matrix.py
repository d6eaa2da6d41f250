"""``make matrix``: every supported stack (a "leg") built into its own environment and put through the same smoke
checks (the tests marked ``smoke``), with the table written into docs/stack.md.

    python3 scripts/matrix.py                 # every leg
    python3 scripts/matrix.py legacy          # one leg (the table keeps the other legs' last rows)
    python3 scripts/matrix.py --no-table legacy

A leg is a Python, a pinned file and the frameworks Horovod is built for. The default leg is the project's own set-up
(``scripts/setup.sh``, ``constraints.txt``, ``.venv``); the legacy leg is the same script with 2023's constraints
(``matrix/legacy-constraints.txt``); the others install a requirements file (``matrix/<leg>.txt``). Each but the
default lives in ``.matrix/<leg>/venv``, an environment a user can use (``source .matrix/legacy/venv/bin/activate``).
Each is built by the plugin's build command with the wheel in its cache (``~/.cache/flytekitplugins-horovod``), so a
second run rebuilds nothing. Standard library only.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
STACK_DOC = ROOT / "docs" / "stack.md"
BEGIN, END = "<!-- matrix:begin -->", "<!-- matrix:end -->"
RESULTS = ROOT / ".matrix" / "results.json"  # each leg's last result, so one leg's run keeps the others' rows


@dataclass(frozen=True)
class Leg:
    name: str
    python: str  # the interpreter's name; found on PATH or under pyenv
    frameworks: List[str]  # what Horovod is built for
    what: str  # one line for the table
    smoke_paths: tuple = ("tests",)  # where its smoke tests are collected (a leg without TensorFlow: its own files)
    constraints: Optional[str] = None  # set: built by scripts/setup.sh with these constraints (and the petastorm extra)

    @property
    def venv(self) -> Path:
        return ROOT / ".venv" if self.name == "default" else ROOT / ".matrix" / self.name / "venv"

    @property
    def bin_python(self) -> str:
        return str(self.venv / "bin" / "python")

    @property
    def requirements(self) -> Path:
        return ROOT / "matrix" / f"{self.name}.txt"


LEGS = {leg.name: leg for leg in [
    Leg("default", "python3.12", ["tensorflow", "pytorch"],
        "Python 3.12, tensorflow 2.21 + tf-keras, torch 2.15, pyspark 4.3, pyarrow 26, numpy 2 (constraints.txt)"),
    Leg("legacy", "python3.11", ["tensorflow", "pytorch"],
        "Python 3.11, tensorflow-cpu 2.15.1 (Keras 2), torch 2.13.0 CPU, pyspark 3.5, pyarrow 10, petastorm "
        "(matrix/legacy-constraints.txt)", constraints="matrix/legacy-constraints.txt"),
    Leg("mxnet", "python3.11", ["mxnet"],
        "Python 3.11, mxnet 1.9.1, numpy 1.23.5, pyspark 3.5 (matrix/mxnet.txt)", ("tests/plugin/test_mxnet_mpi.py",)),
]}


def say(message: str) -> None:
    print(f"[matrix] {message}", file=sys.stderr, flush=True)


def interpreter(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(os.path.expanduser(
        f"~/.pyenv/versions/{name.removeprefix('python')}.*/bin/{name}")), reverse=True)), None)
    if not found:
        raise SystemExit(f"[matrix] no {name} on PATH or under ~/.pyenv/versions: install it to build this leg")
    return found


def run(command: List[str], log: Path, **kwargs) -> int:
    """Run ``command`` with its output appended to ``log``; its exit code."""
    with log.open("a") as sink:
        sink.write(f"\n$ {' '.join(command)}\n")
        sink.flush()
        return subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, **kwargs).returncode


def build(leg: Leg, log: Path) -> Dict[str, object]:
    """Set the leg's environment up (the default leg through scripts/setup.sh); its minutes and what the build
    command reported."""
    started = time.monotonic()
    if leg.name == "default" or leg.constraints:  # scripts/setup.sh: its own defaults, or this leg's constraints
        env = {**os.environ, "VENV": str(leg.venv), "CONSTRAINTS": str(ROOT / leg.constraints),
               "EXTRAS": "test,petastorm"} if leg.constraints else None
        code = run(["bash", str(ROOT / "scripts" / "setup.sh")], log, cwd=ROOT, env=env)
    else:
        leg.venv.parent.mkdir(parents=True, exist_ok=True)
        pip = [leg.bin_python, "-m", "pip", "--disable-pip-version-check", "-q", "install"]
        code = 0 if Path(leg.bin_python).exists() else run([interpreter(leg.python), "-m", "venv", str(leg.venv)], log)
        code = (code
                or run(pip + ["-r", str(leg.requirements)], log)
                or run(pip + ["--no-deps", "-e", str(ROOT / "plugins" / "horovod-flyte-runtime"),
                               "-e", str(ROOT / "plugins" / "flytekit-horovod"), "-e", str(ROOT)], log)
                or run([leg.bin_python, "-m", "horovod_flyte_runtime.build", "--frameworks", *leg.frameworks], log))
    text = log.read_text(errors="replace")
    reported = re.findall(r"^horovod \S+ for Python .*$", text, re.M)
    compiled = re.findall(r"built in ([\d.]+) min", text)
    return {"built": code == 0, "build_minutes": round((time.monotonic() - started) / 60, 1),
            "horovod": f"compiled in {compiled[-1]} min" if compiled else "wheel from the cache",
            "report": reported[-1] if reported else "", "size_gb": round(_size(leg.venv) / 1e9, 1)}


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def smoke(leg: Leg, log: Path) -> Dict[str, str]:
    """The tests marked ``smoke``, run by the leg's Python: each test's outcome by its id."""
    junit = log.with_suffix(".xml")
    run([leg.bin_python, "-m", "pytest", "-m", "smoke", "-p", "no:cacheprovider",
         f"--junitxml={junit}", *leg.smoke_paths], log, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    outcomes = {}
    if junit.exists():
        for case in ElementTree.parse(junit).iter("testcase"):
            name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
            kinds = [child.tag for child in case]
            outcomes[name] = ("failed" if {"failure", "error"} & set(kinds) else
                              "skipped" if "skipped" in kinds else "passed")
    return outcomes


def versions(leg: Leg) -> str:
    """Python's and the main packages' versions in the leg's environment, as one line."""
    names = ["tensorflow", "tensorflow-cpu", "tf-keras", "torch", "mxnet", "pyspark", "pyarrow", "numpy", "flytekit"]
    code = ("import importlib.metadata as m, platform\nprint('Python', platform.python_version())\nfor n in %r:\n"
            "    try: print(n, m.version(n))\n    except Exception: pass" % names)
    done = subprocess.run([leg.bin_python, "-c", code], capture_output=True, text=True)
    return ", ".join(line for line in done.stdout.split("\n") if line)


def table(results: Dict[str, Dict[str, object]]) -> str:
    checks = sorted({check for result in results.values() for check in result.get("smoke", {})})
    legs = [name for name in LEGS if name in results]
    mark = {"passed": "pass", "failed": "**FAIL**", "skipped": "skip"}
    lines = ["| check | " + " | ".join(legs) + " |", "|---|" + "---|" * len(legs)]
    for key, label in (("versions", "versions"), ("report", "Horovod build (what runs)"), ("horovod", "Horovod wheel"),
                       ("build_minutes", "set-up minutes of the last run (Horovod compiled, or its wheel cached)"),
                       ("size_gb", "environment size, GB")):
        lines.append(f"| {label} | " + " | ".join(str(results[leg].get(key, "")) for leg in legs) + " |")
    for check in checks:
        lines.append(f"| `{check}` | " + " | ".join(mark.get(results[leg].get("smoke", {}).get(check, ""), "not run")
                                                   for leg in legs) + " |")
    when = max(str(results[leg].get("when", "")) for leg in legs)
    return "\n".join([f"Written by `make matrix` (scripts/matrix.py); last run {when}.", "", *lines])


def write_table(results: Dict[str, Dict[str, object]]) -> None:
    doc = STACK_DOC.read_text()
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    STACK_DOC.write_text(doc[:start] + "\n" + table(results) + "\n" + doc[end:])


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="make matrix", description=__doc__.split("\n\n")[0])
    parser.add_argument("legs", nargs="*", metavar="LEG", help=f"default: all of {', '.join(LEGS)}")
    parser.add_argument("--no-table", action="store_true", help="do not rewrite docs/stack.md")
    args = parser.parse_args(argv)
    unknown = [name for name in args.legs if name not in LEGS]
    if unknown:
        parser.error(f"unknown leg {', '.join(unknown)}; the legs are: {', '.join(LEGS)}")
    failed = False
    for name in args.legs or list(LEGS):
        leg = LEGS[name]
        log = ROOT / ".matrix" / name / "matrix.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
        say(f"{name}: building ({leg.what}); log: {log}")
        result = build(leg, log)
        say(f"{name}: {'built' if result['built'] else 'BUILD FAILED'} in {result['build_minutes']} min: "
            f"{result['report']}")
        if result["built"]:
            result["versions"] = versions(leg)
            result["smoke"] = smoke(leg, log)
            passed = sum(outcome == "passed" for outcome in result["smoke"].values())
            say(f"{name}: smoke {passed} of {len(result['smoke'])} passed")
            failed |= any(outcome == "failed" for outcome in result["smoke"].values()) or not result["smoke"]
        failed |= not result["built"]
        result["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        # re-read first: another leg may have been run meanwhile (make matrix LEGS=a and LEGS=b side by side)
        results = {**(json.loads(RESULTS.read_text()) if RESULTS.exists() else {}), name: result}
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1))
    if not args.no_table:
        write_table(results)
        say(f"table written into {STACK_DOC.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
