"""A launcher (``mpirun``, ``horovodrun``, or a Gloo rank process itself) that does not exit once every rank has
returned: each rank marks that it returned (``mark_returned``), and the launch's side (``LauncherExitWatch``, asked
once a second by ``Processes.wait``) gives the launcher ``LAUNCHER_EXIT_GRACE_S`` s more, then stops it.

Seen for real: two TCP connections to ``mpirun``'s listeners that each sent a line of junk and stayed open kept
``mpirun`` from exiting after both ranks had returned; nothing else ended the task.

No flytekit import: rank processes started by Spark tasks import ``rank``, which uses this module.
"""

import logging
import os
import time
from typing import Any, Callable, Optional

import fsspec

logger = logging.getLogger("flytekitplugins.horovod")

# How long the launcher may take to exit after the last rank returned. A rank that returned still runs
# ``hvd.shutdown`` (MPI_Finalize: a fence through mpirun) and mpirun then reaps its ranks and closes its daemons:
# under a second on an idle host, a few on a loaded one (a 2-core CI runner, under ``nice``). 15 s is several times
# that, and with ``Processes.stop``'s 5 s from SIGTERM to SIGKILL a wedged launcher is gone ~20 s after the last rank
# returned, well within the task's promise (60 s).
LAUNCHER_EXIT_GRACE_S = 15.0
RETURNED = "returned"  # the folder of the markers, under the job's result folder (or the cluster's failure folder)


def mark_returned(folder: str, rank: int, code: int, size: int) -> None:
    """Record that ``rank`` (of a world of ``size``) returned with exit ``code``: ``FOLDER/returned/rank-N``, holding
    ``code size``. ``folder`` is a local path or any fsspec URL the launcher reads; best effort (a rank never fails for
    it)."""
    try:
        fs, _, (root,) = fsspec.get_fs_token_paths(folder.rstrip("/"))
        fs.makedirs(f"{root}/{RETURNED}", exist_ok=True)
        fs.pipe_file(f"{root}/{RETURNED}/rank-{rank}", f"{code} {size}".encode())
    except Exception as exc:  # the launcher then waits for its launcher's exit as it did before
        logger.warning("rank %d: could not record that it returned in %s: %s", rank, folder, exc)


def mark_this_rank_returned(folder: str, settings: Any, code: int) -> None:
    """``mark_returned`` for this rank process, ``settings`` its ``Horovod`` settings (or None). An elastic rank only
    when it succeeded, with its rank and size at the end: a worker that failed is replaced, only the final world's ends
    count."""
    from .rank_start import launched_rank, launched_size

    rank, size = launched_rank() or 0, launched_size() or 1
    if os.environ.get("HOROVOD_ELASTIC") == "1":
        try:
            hvd = settings.module() if settings is not None and code == 0 else None
            if hvd is None or not hvd.is_initialized():
                return
            rank, size = hvd.rank(), hvd.size()
        except Exception:  # no world to speak of: the launcher waits for its launcher as before
            return
    mark_returned(folder, rank, code, size)


def remove_marks(folder: str) -> None:
    """Remove the markers under ``folder``, and ``folder`` where nothing else is in it."""
    fs, _, (root,) = fsspec.get_fs_token_paths(folder.rstrip("/"))
    try:
        if fs.exists(f"{root}/{RETURNED}"):
            fs.rm(f"{root}/{RETURNED}", recursive=True)
        if fs.exists(root) and not fs.ls(root):
            fs.rmdir(root)
    except Exception as exc:
        logger.warning("could not remove the ranks' markers in %s: %s", folder, exc)


class LauncherExitWatch:
    """Whether every rank of the job whose markers are under ``folder`` has returned and ``name`` (the launcher) has
    not exited ``grace`` s after that. A callable for ``Processes.wait(give_up=...)``; ``size`` None reads the world's
    size from rank 0's marker (an elastic job, whose size is known only at its end). ``also`` must hold too (a
    cluster rank 0's pyflyte-execute wrote its outputs or error after its marker)."""

    def __init__(self, folder: str, name: str, size: Optional[int] = None, grace: float = LAUNCHER_EXIT_GRACE_S,
                 also: Callable[[], bool] = lambda: True):
        self.folder, self.name, self.size, self.grace, self.also = folder.rstrip("/"), name, size, grace, also
        self.fs, _, (self.root,) = fsspec.get_fs_token_paths(self.folder)
        self.returned_at: Optional[float] = None
        self.gave_up = False  # True once the launcher was given up on: the caller stopped it

    def _markers(self) -> dict:
        self.fs.invalidate_cache()
        found = {}
        for path in self.fs.glob(f"{self.root}/{RETURNED}/rank-*"):
            try:
                code, size = self.fs.cat(path).decode().split()
                found[int(path.rsplit("-", 1)[1])] = (int(code), int(size))
            except (OSError, ValueError):
                continue
        return found

    def all_returned(self) -> bool:
        markers = self._markers()
        size = self.size if self.size is not None else markers.get(0, (0, None))[1]
        return size is not None and all(rank in markers for rank in range(size))

    def __call__(self) -> bool:
        if self.returned_at is None:
            if not (self.all_returned() and self.also()):
                return False
            self.returned_at = time.monotonic()
        if time.monotonic() - self.returned_at < self.grace:
            return False
        self.gave_up = True
        return True

    def failed_ranks(self) -> list:
        """The ranks whose marker says they exited non-zero."""
        return sorted(rank for rank, (code, _) in self._markers().items() if code != 0)

    def message(self) -> str:
        """What the task says about it: the launcher, how long it was waited for, what was done."""
        return (f"{self.name} did not exit within {self.grace:.0f} s after every rank had returned; stopped it (its "
                f"process group, SIGTERM then SIGKILL)")
