"""One Horovod rank: what it runs (``RankJob``), how it runs it (``run_rank``: started and watched, see
``rank_start`` and ``rank_watches``), and the entry point of every rank process the launchers start:
``python -c RANK_ENTRY JOB RESULT``.

No flytekit import at module level: Spark tasks run parts of this module (pickled by value) without importing it.
"""

import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import cloudpickle

from .failures import RankFailures
from .flyte_context import FlyteRankContext
from .launcher_exit import mark_this_rank_returned
from .processes import die_with_launcher
from .rank_exit import exit_now
from .rank_start import collect_garbage_less_often, current_rank, launched_rank
from .rank_watches import RankWatches
from .settings import Horovod, HorovodConfigError
from .tensorboard_stub import is_torch_estimator_trainer, tensorboard_without_tensorflow

# How every rank process starts: ``rank_main`` with where its job comes from and where its result goes.
RANK_ENTRY = "from horovod_flyte_runtime.rank import rank_main; rank_main()"
STDIN = "-"  # JOB argument: the pickled job arrives on standard input
RESULT_FD = "fd:"  # RESULT argument prefix: write the pickled result to this inherited file descriptor


@dataclass
class RankJob:
    """Everything one rank runs: the pickled function, its kwargs and where to report a failure."""

    fn: bytes
    kwargs: Dict[str, Any]
    failure_dir: str
    settings: Horovod
    flyte: Optional[FlyteRankContext] = None
    all_ranks: bool = False
    workdir: Optional[str] = None  # a folder the launcher removes when the job ends, for the ranks' scratch files
    tensorboard_stub: bool = False  # the TorchEstimator's trainer: TensorBoard without TensorFlow (tensorboard_stub)

    @classmethod
    def of(cls, fn: Callable, kwargs: Optional[Dict[str, Any]], failure_dir: str, settings: Horovod,
           **options: Any) -> "RankJob":
        """The job of ``fn(**kwargs)``, with ``framework="auto"`` resolved for ``fn`` (the ranks get the body pickled,
        not its code); ``HorovodConfigError`` if ``fn`` or a kwarg cannot be pickled to the ranks."""
        kwargs = dict(kwargs or {})
        for name, value in kwargs.items():
            pickled(value, f"argument {name!r}", HorovodConfigError)
        return cls(pickled(fn, "the function", HorovodConfigError), kwargs, failure_dir, settings.for_body(fn),
                   tensorboard_stub=is_torch_estimator_trainer(fn), **options)


@dataclass
class RankResult:
    """What a rank sends back: its return value and, from rank 0, the Flyte decks it made."""

    value: Any
    decks: List[Any] = field(default_factory=list)


def run_rank(job: RankJob) -> Optional[RankResult]:
    """Run a job in this rank process: start the rank, the function, and record a failure before re-raising."""
    rank = launched_rank() or 0
    watches = RankWatches(job.settings, RankFailures(job.failure_dir))
    if job.tensorboard_stub:  # before the function is unpickled: that imports the trainer's module
        tensorboard_without_tensorflow()
    try:
        rank, _ = watches.start()
        fn = cloudpickle.loads(job.fn)
        if job.flyte is None:
            value, decks = fn(**job.kwargs), []
        else:
            with job.flyte.enter(job.workdir) as ctx:
                value = fn(**job.kwargs)
                decks = job.flyte.decks(ctx)
        rank = current_rank(job.settings, rank)
        if rank != 0 and not job.all_ranks:
            return None
        pickled(value, f"rank {rank}'s result", TypeError)  # a user error, recorded as raised: never a lost rank
        return RankResult(value, decks if rank == 0 else [])
    except BaseException as exc:  # report, then let the launcher see the failure
        watches.record_failure(rank, exc)
        raise
    finally:
        watches.stop()


def pickled(value: Any, what: str, error: type) -> bytes:
    """``value`` pickled (cloudpickle), or ``error`` naming ``what`` and the value's type: it must be picklable."""
    try:
        return cloudpickle.dumps(value)
    except Exception as exc:
        kind = f"{type(value).__module__}.{type(value).__qualname__}"
        raise error(f"{what} ({kind}) cannot be pickled: {type(exc).__name__}: {exc}; it must be picklable to pass "
                    f"between the task and its Horovod ranks") from None


def import_path(fn: Callable) -> str:
    """A PYTHONPATH for the ranks under which ``fn``'s module imports by name, as it does here.

    ``pyflyte run file.py`` imports the file as a module with its folder on ``sys.path`` only while loading;
    the ranks unpickle the function's globals by module name, so they need that folder on their path.
    """
    roots = []
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    if getattr(module, "__file__", None):
        path = os.path.abspath(module.__file__)
        depth = module.__name__.count(".") + (2 if os.path.basename(path) == "__init__.py" else 1)
        for _ in range(depth):
            path = os.path.dirname(path)
        roots.append(path)
    # A site-packages folder (this venv's, or a base venv's that a .pth file names) is left to the rank's own site
    # set-up, which is this interpreter's: put first on PYTHONPATH, a base venv's copy of a package would shadow this
    # venv's editable install of it (a rank of a git worktree's venv ran the main checkout's plugin)
    system = (sys.prefix, sys.base_prefix)
    roots += [p for p in sys.path if p and os.path.isdir(p) and not p.startswith(system)
              and os.path.basename(os.path.normpath(p)) not in ("site-packages", "dist-packages")]
    roots += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(roots))


def rank_command(job: str, result: str, executable: Optional[str] = None) -> List[str]:
    """The command of one rank process (see ``rank_main`` for ``job`` and ``result``)."""
    return [executable or sys.executable, "-c", RANK_ENTRY, job, result]


def rank_main(argv: Optional[Sequence[str]] = None) -> None:
    """The entry point of every rank process: ``python -c RANK_ENTRY JOB RESULT``.

    JOB is the pickled ``RankJob``'s file, or ``-`` for standard input. RESULT is a folder (the result goes to
    ``RESULT/result-<rank>.pkl``) or ``fd:N`` (to that inherited pipe). Exit status 0 on success, 1 on failure;
    the process exits when its launcher is gone.
    """
    die_with_launcher()
    collect_garbage_less_often()  # before the job's unpickling imports its Flyte SDK (a cluster rank: start_rank)
    job_arg, result_arg = (argv or sys.argv)[1:3]
    code, job = 0, None
    try:
        if job_arg == STDIN:
            job = cloudpickle.loads(sys.stdin.buffer.read())
        else:
            with open(job_arg, "rb") as f:
                job = cloudpickle.load(f)
        result = run_rank(job)
        if result is not None:
            rank = current_rank(job.settings, launched_rank() or 0)
            data = cloudpickle.dumps(result)
            if result_arg.startswith(RESULT_FD):
                with os.fdopen(int(result_arg[len(RESULT_FD):]), "wb") as f:
                    f.write(data)
            else:
                write_file(os.path.join(result_arg, f"result-{rank}.pkl"), data)
    except BaseException:
        traceback.print_exc()
        code = 1
    if not result_arg.startswith(RESULT_FD):
        mark_this_rank_returned(result_arg, job.settings if job is not None else None, code)
    exit_now(code)


def write_file(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` whole: into a temporary name, then renamed."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read_results(result_dir: str, num_proc: int) -> List[Optional[RankResult]]:
    """The results ranks wrote to ``result_dir`` (None for a rank that wrote none), by rank."""
    results: List[Optional[RankResult]] = []
    for rank in range(num_proc):
        path = os.path.join(result_dir, f"result-{rank}.pkl")
        if os.path.exists(path):
            with open(path, "rb") as f:
                results.append(cloudpickle.load(f))
        else:
            results.append(None)
    return results
