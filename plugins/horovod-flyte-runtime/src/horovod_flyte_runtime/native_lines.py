"""Lines that native code writes straight to file descriptor 2, where no Python logging or warning filter reaches:
TensorFlow's C++ start-up in every process that loads it (absl's notice; "oneDNN custom operations are on" on a CPU
where TensorFlow turns oneDNN on by default, e.g. AVX-512 VNNI, which TF_CPP_MIN_LOG_LEVEL does not silence; and with
the CUDA build of tensorflow that tf-keras requires, "Could not find cuda drivers" twice and "failed call to cuInit" on
a machine without a GPU), and the
JVM's "Using incubator modules" notice (Spark 4 adds ``jdk.incubator.vector``). Each says nothing a user can act on.

``is_native_noise`` drops them from the ranks' console lines (``RankOutput``: the rank logs keep them);
``filter_native_stderr`` passes this process's own file descriptor 2 (and 1, where it is the same file), and so those
of every process it starts from then on (the Spark driver JVM, its Python workers), through a small filter process that
drops them and nothing else. The
filter is a process, not a thread, so that what a crashing process wrote last (a fatal error, an abort's message)
still reaches the console. ``Horovod(verbose=True)`` or ``FLYTE_HOROVOD_VERBOSE=1`` keeps every line. No flytekit
import: Spark executors run this module.
"""

import contextlib
import fcntl
import os
import re
import subprocess
import sys
import termios
import tty
from typing import Optional, Tuple

# a rank's launcher prefix ("[0]<stderr>:", "[1,0]<stderr>:"), then one of the known lines
KNOWN_NATIVE_LINES = (
    r"^(?:\[\d+(?:,\d+)?\]<std(?:out|err)>:)?(?:"
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|I\d{4} \S+ +\d+ port\.cc:\d+\] oneDNN custom operations are on\. You may see slightly different numerical "
    r"results due to floating-point round-off errors from different computation orders\. To turn them off, set the "
    r"environment variable `TF_ENABLE_ONEDNN_OPTS=0`\."
    r"|I\d{4} \S+ +\d+ cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine, GPU will not be used\."
    r"|E\d{4} \S+ +\d+ cuda_platform\.cc:\d+\] failed call to cuInit: .*"
    r"|WARNING: Using incubator modules: jdk\.incubator\.vector"
    r")\r?$")
_KNOWN = re.compile(KNOWN_NATIVE_LINES)
FILTERED_ENV = "FLYTE_HOROVOD_STDERR_FILTER"  # the filter pipe's identity: processes started behind it need no other

# The filter: complete lines are checked; a partial line (a prompt, a progress bar) is passed on once nothing more
# arrives for 0.1 s. It ignores Ctrl-C (the processes writing to it end first) and ends when every writer has closed.
_FILTER = r"""
import errno, os, re, select, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
known, tail = re.compile(sys.argv[1].encode()), b""
def put(data):
    while data:
        data = data[os.write(1, data):]
while True:
    if not select.select([0], [], [], 0.1 if tail else None)[0]:
        put(tail)
        tail = b""
        continue
    try:
        chunk = os.read(0, 65536)
    except OSError as exc:  # a pseudo-terminal whose every writer has closed
        if exc.errno != errno.EIO:
            raise
        chunk = b""
    if not chunk:
        break
    *lines, tail = (tail + chunk).split(b"\n")
    put(b"".join(line + b"\n" for line in lines if not known.match(line)))
put(tail)
"""

_filter: Optional[subprocess.Popen] = None


def is_native_noise(line: str) -> bool:
    """Whether ``line`` (one line, with or without a rank's prefix) is one of the known native start-up lines."""
    return _KNOWN.match(line.rstrip("\n")) is not None


def _identity(fd: int) -> str:
    stat = os.fstat(fd)
    return f"{stat.st_dev}:{stat.st_ino}"


def _terminal_like(original: int) -> Tuple[int, int]:
    """A pseudo-terminal (reader, writer) of ``original``'s size, raw (no newline translation on the way in): what
    writes to the console still finds a terminal (colours, line buffering, width)."""
    reader, writer = os.openpty()
    with contextlib.suppress(OSError):
        fcntl.ioctl(writer, termios.TIOCSWINSZ, fcntl.ioctl(original, termios.TIOCGWINSZ, b"\0" * 8))
    tty.setraw(writer)
    return reader, writer


def filter_native_stderr() -> None:
    """Pass file descriptor 2 of this process, and of those it starts from now on, through the filter (once). Where
    file descriptor 1 is the same file (a console, or one pipe for both), it goes through the same filter, so the two
    keep their order; a terminal stays a terminal (a pseudo-terminal in between)."""
    global _filter
    try:
        if os.environ.get(FILTERED_ENV) == _identity(2):
            return  # this process, or the one that started it, has done it
        both = _identity(1) == _identity(2)
    except OSError:
        return  # no file descriptor 1 or 2: nothing to filter
    sys.stdout.flush()
    sys.stderr.flush()
    original = os.dup(2)
    reader, writer = _terminal_like(original) if os.isatty(original) else os.pipe()
    try:
        _filter = subprocess.Popen([sys.executable, "-I", "-S", "-c", _FILTER, KNOWN_NATIVE_LINES],
                                   stdin=reader, stdout=original, stderr=original, start_new_session=True)
    finally:
        os.close(reader)
        os.close(original)
    for fd in (1, 2) if both else (2,):
        os.dup2(writer, fd)
    os.close(writer)
    os.environ[FILTERED_ENV] = _identity(2)
