"""Docs are tests: every code block of README.md and docs/*.md runs, or is checked, as its directive says.

``run`` blocks run as a reader would run them (bash, or the venv's python), in a fresh folder holding the doc's
``file`` blocks (``cwd=repo``: a folder that also links every top-level entry of the repository, so repository
paths work and nothing is written into the checkout); their ``output`` block must appear in what they print.
``syntax`` blocks (commands for a cluster, Docker, Helm) are parsed, and the commands in them that refer to this
repository (make targets, ``python -m`` modules, scripts, Docker build args) are checked against it.
"""

import ast
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List

import pytest
import yaml

from tests.conftest import VENV_BIN, _leftovers, run_command
from tests.docs.markdown import BLOCK_KINDS, PROSE_KINDS, ROOT, RUN_OPTIONS, Block, Doc, docs

DOCS = docs()
SHELLS = ("bash", "sh", "shell")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _blocks(*kinds: str) -> Iterator:
    for doc in DOCS:
        for block in doc.blocks:
            if block.directive and block.directive.kind in kinds:
                marks = [pytest.mark.slow] if "slow" in block.directive.options else []
                yield pytest.param(doc, block, id=block.where, marks=marks)


# ---------------------------------------------------------------- the convention itself
@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_code_block_says_how_it_is_tested(doc: Doc):
    problems = [f"{doc.name}:{d.line}: directive {d.kind!r} is not followed by what it applies to (a code block; for "
                f"{' or '.join(sorted(PROSE_KINDS))}, a paragraph or table)" for d in doc.stray]
    previous = None
    for block in doc.blocks:
        d = block.directive
        if d is None:
            problems.append(f"{block.where}: code block without a <!-- doc-test: ... --> directive before it")
        elif d.kind not in BLOCK_KINDS:
            problems.append(f"{block.where}: unknown kind {d.kind!r} (one of {', '.join(sorted(BLOCK_KINDS))})")
        elif d.kind == "file" and len(d.words) != 1:
            problems.append(f"{block.where}: 'file' needs exactly one file name")
        elif d.kind == "run" and set(d.options) - RUN_OPTIONS:
            problems.append(f"{block.where}: unknown run options {sorted(set(d.options) - RUN_OPTIONS)}")
        elif d.kind == "run" and block.lang not in SHELLS + ("python",):
            problems.append(f"{block.where}: a run block must be bash or python, not {block.lang!r}")
        elif d.kind == "output" and not (previous and previous.directive and previous.directive.kind == "run"):
            problems.append(f"{block.where}: an output block must follow a run block")
        elif d.kind == "syntax" and not d.words:
            problems.append(f"{block.where}: 'syntax' needs the reason the block cannot run here")
        previous = block
    assert not problems, "\n".join(problems)


def test_the_docs_have_runnable_snippets():
    """The convention is in use: a doc set whose directives all say ``text`` would pass everything else."""
    kinds = [b.directive.kind for d in DOCS for b in d.blocks if b.directive]
    assert kinds.count("run") >= 10 and kinds.count("output") >= 5, kinds


# ---------------------------------------------------------------- run blocks
def _workdir(doc: Doc, block: Block, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    if block.directive.options.get("cwd") == "repo":
        for entry in ROOT.iterdir():
            if entry.name not in (".git", "__pycache__"):
                (work / entry.name).symlink_to(entry)
    for name, text in doc.files().items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    return work


def _command(block: Block, tmp_path: Path) -> List[str]:
    script = tmp_path / ("snippet.py" if block.lang == "python" else "snippet.sh")
    script.write_text(block.text)
    if block.lang == "python":
        return [str(VENV_BIN / "python"), str(script)]
    return ["bash", "-e", "-o", "pipefail", str(script)]


def _flat(text: str) -> str:
    return " ".join(_ANSI.sub("", text).split())


def missing_output(expected: str, output: str) -> List[str]:
    """Expected lines not found, in order, in the output. Whitespace (line wrapping included) is not significant;
    ``...`` stands for any text; a line of only ``...`` is a visual gap."""
    flat, position, missing = _flat(output), 0, []
    for line in expected.splitlines():
        if not line.strip() or line.strip() == "...":
            continue
        pattern = ".*?".join(re.escape(part) for part in _flat(line).split("..."))
        match = re.compile(pattern).search(flat, position)
        if match is None:
            missing.append(line)
        else:
            position = match.end()
    return missing


@pytest.mark.parametrize("doc, block", list(_blocks("run")))
def test_run_block(doc: Doc, block: Block, tmp_path: Path):
    options = block.directive.options
    work = _workdir(doc, block, tmp_path)
    ran = run_command(_command(block, tmp_path), cwd=work, timeout=float(options.get("timeout", 600)))
    tail = ran.output[-4000:]
    if "fails" in options:
        assert ran.returncode != 0, f"{block.where} should fail but exited 0:\n{tail}"
    else:
        assert ran.returncode == 0, f"{block.where} exited {ran.returncode}:\n{tail}"
    expected = doc.output_of(block)
    if expected is not None:
        missing = missing_output(expected.text, ran.output)
        assert not missing, f"{expected.where}: not in the output of {block.where}: {missing}\n--- output:\n{tail}"
    time.sleep(0.5)
    assert _leftovers(ran.marker) == [], f"{block.where} left processes running"


def test_output_matching_is_strict_enough():
    out = "[0]<stderr>:x\nRankFailedError: Error encountered\n  while executing 'f':\n  Horovod rank 1 failed: boom"
    assert missing_output("RankFailedError: Error encountered while executing 'f':\nHorovod rank 1 failed...", out) == []
    assert missing_output("Horovod rank 0 failed", out) == ["Horovod rank 0 failed"]
    assert missing_output("Horovod rank 1 failed\nRankFailedError", out) == ["RankFailedError"]  # order counts


# ---------------------------------------------------------------- syntax of every code block
def _check_python(text: str) -> None:
    ast.parse(text)


def _check_yaml(text: str) -> None:
    list(yaml.safe_load_all(text))


def _check_shell(text: str) -> None:
    ran = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    assert ran.returncode == 0, ran.stderr


CHECKERS: Dict[str, Callable[[str], None]] = {"python": _check_python, "yaml": _check_yaml, "yml": _check_yaml,
                                              **{shell: _check_shell for shell in SHELLS}}


@pytest.mark.parametrize("doc, block", list(_blocks("file", "run", "syntax")))
def test_code_block_parses(doc: Doc, block: Block):
    assert block.lang in CHECKERS, f"{block.where}: no syntax checker for {block.lang!r}; mark it 'text' if it is not code"
    try:
        CHECKERS[block.lang](block.text)
    except Exception as exc:  # the parser's own message says where
        pytest.fail(f"{block.where}: {block.lang} does not parse: {exc}")


# ---------------------------------------------------------------- commands that cannot run here, checked statically
def shell_commands(text: str) -> Iterator[List[str]]:
    """Each simple command of a shell block as words (continuation lines joined, comments dropped)."""
    for line in text.replace("\\\n", " ").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        command: List[str] = []
        for word in words + [";"]:
            if word in (";", "&&", "||", "|"):
                if command:
                    yield command
                command = []
            else:
                command.append(word)


def _check_make(words: List[str]) -> None:
    for target in [w for w in words[1:] if not w.startswith("-")]:
        ran = subprocess.run(["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True)
        assert ran.returncode == 0, f"make target {target!r}: {ran.stderr.strip()}"


def _check_python_module(words: List[str]) -> None:
    if "-m" in words:
        module = words[words.index("-m") + 1]
        sys.path.insert(0, str(ROOT))
        try:
            assert importlib.util.find_spec(module) is not None, f"python -m {module}: no such module"
        finally:
            sys.path.remove(str(ROOT))


def _check_docker(words: List[str]) -> None:
    if words[1:2] != ["build"]:
        return
    dockerfile = (ROOT / "Dockerfile").read_text()
    for i, word in enumerate(words):
        if word == "--build-arg":
            name = words[i + 1].split("=")[0]
            assert re.search(rf"^ARG {name}\b", dockerfile, re.M), f"Dockerfile has no ARG {name}"


def _check_script(words: List[str]) -> None:
    scripts = [w for w in words[1:] if w.endswith(".sh")]
    for script in scripts:
        assert (ROOT / script).is_file(), f"bash {script}: no such file in the repository"


COMMAND_CHECKS: Dict[str, Callable[[List[str]], None]] = {
    "make": _check_make, "python": _check_python_module, "python3": _check_python_module, "docker": _check_docker,
    "bash": _check_script,
}


@pytest.mark.parametrize("doc, block", [p for p in _blocks("syntax") if p.values[1].lang in SHELLS])
def test_commands_refer_to_what_exists(doc: Doc, block: Block):
    for words in shell_commands(block.text):
        check = COMMAND_CHECKS.get(os.path.basename(words[0]))
        if check is not None:
            check(words)


def test_make_targets_named_inline_exist():
    named = {(span.where, span.text) for doc in DOCS for span in doc.spans if re.fullmatch(r"make [\w -]+", span.text)}
    assert len(named) >= 3, named  # README names make run-mpi and make bench; testing.md make test-fast
    for where, text in sorted(named):
        try:
            _check_make(text.split())
        except AssertionError as exc:
            pytest.fail(f"{where}: `{text}`: {exc}")
