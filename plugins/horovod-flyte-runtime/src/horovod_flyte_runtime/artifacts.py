"""Where a Horovod task's files are: one line per task with whole paths a user can copy (the ranks' logs, Horovod's
timeline and autotune log, the Deck), and on a cluster the timeline and autotune log copied under the task's raw
output prefix.

Why the raw output prefix, not the task's outputs: the outputs are the task's typed interface, which the user declares
and which caching and downstream tasks key on; files Horovod writes beside the body's work are not part of it. The raw
output prefix is where flytekit already puts a task's data (FlyteFile and FlyteDirectory outputs, the Spark route's
store and rank logs), it outlives the pod, and it is known before the task ends, so the line and the Deck can name
the copies.
"""

import dataclasses
import glob
import os
import time
from typing import List, Optional, Sequence

from .autotune import untried
from .rank_output import LOG_DIR_NAME
from .settings import ARTIFACTS, Horovod

FOLDER = "horovod"  # under a cluster task's raw output prefix: the timeline and autotune log (and Spark's rank logs)
_LABELS = {"timeline_filename": "timeline", "autotune_log_file": "autotune log"}


def rank_logs(folder: Optional[str]) -> List[str]:
    """The rank log files (``rank_output``) in ``folder``, oldest first."""
    return sorted(glob.glob(os.path.join(folder, "ranks-*.log")), key=os.path.getmtime) if folder else []


def where_line(task: str, settings: Horovod, logs: Sequence[str], deck: Optional[str] = None) -> str:
    """``[horovod] <task>: rank logs ...; timeline ...; autotune log ...; Deck ...``, for what there is."""
    parts = [f"rank logs: {' '.join(logs) or 'none (each rank printed where it ran)'}"]
    parts += [f"{label}: {getattr(settings, name)}" for name, label in _LABELS.items() if getattr(settings, name)]
    parts += [f"Deck: {deck}"] if deck else []
    return f"[horovod] {task}: {'; '.join(parts)}"


def say_where(task: str, settings: Horovod, logs: Sequence[str], deck: Optional[str] = None,
              autotune_log: Optional[str] = None) -> None:
    """Print the task's ``where_line``, and the autotune log's news when it holds no configuration (``autotune_log``:
    where rank 0 wrote it on this host, when ``settings`` names a copy)."""
    print(where_line(task, settings, logs, deck), flush=True)
    news = untried(autotune_log or settings.autotune_log_file)
    if news:
        print(f"[horovod] {task}: {news}", flush=True)


def in_working_directory(settings: Horovod) -> Horovod:
    """``settings`` with relative Horovod file paths made whole in the running task's working directory."""
    import flytekit

    return settings.files_in(str(flytekit.current_context().working_directory))


def copy_to_raw_output(settings: Horovod) -> Horovod:
    """On a cluster: copy the timeline and autotune log rank 0 wrote to ``<raw output prefix>/horovod/``; the settings
    naming the copies (a file Horovod did not write keeps its local path)."""
    import flytekit
    from flytekit import FlyteContextManager

    prefix = f"{flytekit.current_context().raw_output_prefix.rstrip('/')}/{FOLDER}"
    file_access = FlyteContextManager.current_context().file_access
    copies = {}
    for name in ARTIFACTS:
        path = getattr(settings, name)
        if path and os.path.exists(path):
            copies[name] = f"{prefix}/{os.path.basename(path)}"
            file_access.put_data(path, copies[name])
    return dataclasses.replace(settings, **copies)


def deck_written_since(sandbox: str, since: float) -> Optional[str]:
    """The ``deck.html`` flytekit wrote into this local run's sandbox (a folder of a random name) since ``since``."""
    written = [p for p in glob.glob(os.path.join(sandbox, "*", "deck.html")) if os.path.getmtime(p) >= since]
    return max(written, key=os.path.getmtime) if written else None


class SaysWhere:
    """A Horovod task class (before flytekit's in its bases) whose local run ends with its ``where_line``, once
    flytekit has written its Deck; its config has the ``horovod`` settings. On a cluster the task says it itself."""

    def dispatch_execute(self, ctx, input_literal_map):
        started = time.time()
        try:
            return super().dispatch_execute(ctx, input_literal_map)
        finally:
            if ctx.execution_state and ctx.execution_state.is_local_execution():
                workdir = str(ctx.user_space_params.working_directory)
                deck = deck_written_since(str(ctx.file_access.local_sandbox_dir), started)
                say_where(self.name.split(".")[-1], self.task_config.horovod.files_in(workdir),
                          rank_logs(os.path.join(workdir, LOG_DIR_NAME)), deck)
