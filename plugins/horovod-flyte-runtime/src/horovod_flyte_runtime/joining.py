"""Ranks that never reach ``hvd.init()``: their import or data loading before it never finishes, or their process
never starts. The others wait in ``hvd.init()`` (forever under ``mpirun``), so a rank slow to join says in the job's
failure folder whether it waits in ``hvd.init()`` or has not reached it, and a rank still waiting in ``hvd.init()``
``start_timeout`` seconds after it started names the ranks that did and did not reach it.

No flytekit import: rank processes started by Spark tasks use this module.
"""

import contextlib
import json
import os
import sys
import threading
import time
from typing import Callable, Dict, List

import fsspec

POLL_S = 0.2
STARTED, AT_INIT, JOINED = "started", "at-init", "joined"  # a rank's states, in this order


def _state() -> str:
    """This process's state: its main thread inside Horovod's ``init()`` (waiting for the others), past it, or not
    there yet."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "init" and f"{os.sep}horovod{os.sep}" in code.co_filename:
            return AT_INIT
        frame = frame.f_back
    return JOINED if _initialized() else STARTED


def _initialized() -> bool:
    """Whether ``hvd.init()`` of an imported Horovod framework module has returned in this process."""
    for name in ("horovod.tensorflow", "horovod.torch", "horovod.mxnet"):
        module = sys.modules.get(name)
        with contextlib.suppress(Exception):
            if module is not None and module.is_initialized():
                return True
    return False


class JoinWatch:
    """One rank's part, started before ``hvd.init()``: a rank not past ``hvd.init()`` after half of ``timeout`` says
    (in ``folder``) whether it waits in ``hvd.init()`` or has not reached it. A rank that has waited in ``hvd.init()``
    (which returns once every rank is in it) when ``timeout`` s have passed since its start calls ``on_missing(text)``
    (in a daemon thread), which is expected to end the process. A body that never runs ``hvd.init()`` is never
    reported."""

    def __init__(self, rank: int, size: int, host: str, folder: str, timeout: float,
                 on_missing: Callable[[str], None]):
        self.rank, self.size, self.host, self.timeout, self.on_missing = rank, size, host, timeout, on_missing
        self.fs, _, (self.root,) = fsspec.get_fs_token_paths(folder.rstrip("/"))
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._watch, name="horovod-join-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _say(self, state: str) -> None:
        with contextlib.suppress(Exception):  # the watch must never take the rank down by itself
            self.fs.makedirs(self.root, exist_ok=True)
            self.fs.pipe_file(f"{self.root}/join-{self.rank}.json",
                              json.dumps({"host": self.host, "state": state}).encode())

    def _states(self) -> Dict[int, dict]:
        states = {}
        with contextlib.suppress(Exception):
            self.fs.invalidate_cache()
            for rank in range(self.size):
                with contextlib.suppress(FileNotFoundError, ValueError):
                    states[rank] = json.loads(self.fs.cat(f"{self.root}/join-{rank}.json").decode())
        return states

    def _watch(self) -> None:
        started = time.monotonic()
        said = None
        while not self._stop.wait(POLL_S):
            state = _state()
            if state == JOINED:
                return
            # said only by a rank slow to join (half the timeout): a healthy start writes nothing
            if state != said and time.monotonic() > started + self.timeout / 2:
                said = state
                self._say(state)
            if state == AT_INIT and time.monotonic() > started + self.timeout:
                self.on_missing(self.describe(self._states()))
                return

    def describe(self, states: Dict[int, dict]) -> str:
        """Which ranks waited in hvd.init(), which never reached it, which never started."""
        def ranks(state: str) -> List[str]:
            return [f"{r} on {states[r]['host']}" for r in range(self.size) if states.get(r, {}).get("state") == state]

        parts = [f"{_ranks(ranks(AT_INIT)) if ranks(AT_INIT) else 'no rank'} reached it"]
        if ranks(STARTED):
            parts.append(f"{_ranks(ranks(STARTED))} started but never reached it (an import or a data load before "
                         "hvd.init() that does not finish)")
        never = [str(r) for r in range(self.size) if r not in states]
        if never:
            parts.append(f"{_ranks(never)} never started (its process or Spark task did not run)")
        return (f"Horovod ranks never met: rank {self.rank} on {self.host} waited start_timeout={self.timeout:g} s in "
                f"hvd.init() for every rank; {'; '.join(parts)}")


def _ranks(ranks: List[str]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks)}"
