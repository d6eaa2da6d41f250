"""How a rank process ends: at once, its streams flushed, without the interpreter's teardown.

No flytekit import: rank processes started by Spark tasks use this module.
"""

import atexit
import contextlib
import os
import sys


def exit_now(code: int) -> None:
    """Exit at once after the atexit handlers (``hvd.shutdown``, logging) ran: no interpreter teardown.

    Tearing down an interpreter that imported TensorFlow takes about a second per rank, and the launcher
    (and the task) waits for it; nothing in it matters once the result is written and the streams flushed.
    """
    try:
        atexit._run_exitfuncs()
    finally:
        flush_streams()
        os._exit(code)


def flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
