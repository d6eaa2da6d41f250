"""Test-only observer: logs which process (and which Horovod/MPI rank) writes which file.

Loaded by every Python process of a test run through ``PYTHONPATH`` (Python imports ``sitecustomize`` at start-up);
it changes nothing in what runs. With ``CLUSTER_TEST_WRITE_LOG`` set, an audit hook in each ``pyflyte-execute``
process appends one JSON line per file opened for writing (and per rename/copy target) to that log, so a test can
say exactly which rank wrote ``outputs.pb``. Without the variable it does nothing.
"""

import json
import os
import sys

_LOG = os.environ.get("CLUSTER_TEST_WRITE_LOG")
_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "PMI_RANK")
_EVENTS = frozenset(("open", "os.rename", "shutil.copyfile", "os.link", "os.symlink"))
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _rank():
    for name in _RANK_VARS:
        if os.environ.get(name, "") != "":
            return int(os.environ[name])
    return None


def _record(event, path):
    try:
        path = os.fsdecode(path)
    except TypeError:
        return  # a file descriptor, not a path
    if os.path.abspath(path) == os.path.abspath(_LOG):
        return
    line = json.dumps({"event": event, "path": os.path.abspath(path), "rank": _rank(), "pid": os.getpid()}) + "\n"
    fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write per line: O_APPEND keeps lines whole across processes
    finally:
        os.close(fd)


def _hook(event, args):
    if event not in _EVENTS:  # the hook sees every audit event; return fast from the ones it ignores
        return
    try:
        _observe(event, args)
    except Exception:  # an observer must never break the process it observes
        pass


def _observe(event, args):
    if event == "open":
        path, mode, flags = args
        if path is None or isinstance(path, int):
            return
        writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        if writing:
            _record(event, path)
    elif event in ("os.rename", "shutil.copyfile", "os.link", "os.symlink"):
        _record(event, args[1])


# Only task processes (pyflyte-execute: a plain task, the Spark driver, every MPI rank) are observed; an audit hook
# in every process (Spark's Python workers, horovodrun) slows the run down for nothing they could write.
if _LOG and "pyflyte-execute" in getattr(sys, "orig_argv", ()):
    sys.addaudithook(_hook)
