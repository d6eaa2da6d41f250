"""The Horovod runtime: launch ranks (locally or on Spark), run a function in each, return rank 0's result.

One failure path for every launcher: a rank that raises writes its traceback to a failure folder before it
exits; the launcher's generic "a process exited with non-zero status" becomes a ``RankFailedError`` that
names the first rank that failed and shows its traceback.
"""

import contextlib
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import cloudpickle
import fsspec

from .settings import SETTINGS_ENV, Horovod

logger = logging.getLogger("flytekitplugins.horovod")

# Set by mpirun (OpenMPI), horovodrun / horovod.runner (HOROVOD_RANK) and MPICH / Intel MPI (PMI_RANK).
RANK_ENV_VARS = ("OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "PMI_RANK")
SIZE_ENV_VARS = ("OMPI_COMM_WORLD_SIZE", "HOROVOD_SIZE", "PMI_SIZE")


class RankFailedError(RuntimeError):
    """A Horovod rank raised; the message names the rank and carries its traceback."""


class NotEnoughSlotsError(RuntimeError):
    """Spark cannot run one task per Horovod rank at once."""


def launched_rank() -> Optional[int]:
    """This process's rank when it runs inside an already launched world (mpirun, horovodrun), else None."""
    for name in RANK_ENV_VARS:
        if os.environ.get(name, "") != "":
            return int(os.environ[name])
    return None


def launched_size() -> Optional[int]:
    """The world size set by the launcher of this process, else None."""
    for name in SIZE_ENV_VARS:
        if os.environ.get(name, "") != "":
            return int(os.environ[name])
    return None


def configure_rank_logging(rank: int, size: int) -> None:
    """Prefix this process's log lines with its rank, so interleaved output from N ranks stays readable."""
    fmt = f"[rank {rank}/{size}] %(asctime)s %(levelname)s %(name)s: %(message)s"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt, "%H:%M:%S"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.INFO)


@dataclass
class FlyteRankContext:
    """The parts of a task's Flyte execution context that a rank rebuilds in its own process.

    Every rank sees the launching task's execution id, working directory, raw output prefix and checkpoint,
    so ``flytekit.current_context()`` means the same thing in rank 0 as in the task that launched it.
    """

    mode: Any
    execution_id: Any
    task_id: Any
    execution_date: Any
    working_directory: str
    raw_output_prefix: str
    checkpoint: Any
    enable_deck: bool

    @classmethod
    def capture(cls) -> "FlyteRankContext":
        from flytekit import FlyteContextManager

        ctx = FlyteContextManager.current_context()
        params = ctx.user_space_params
        return cls(
            mode=ctx.execution_state.mode,
            execution_id=params.execution_id,
            task_id=params.task_id,
            execution_date=params.execution_date,
            working_directory=str(params.working_directory),
            raw_output_prefix=params.raw_output_prefix,
            checkpoint=params._checkpoint,
            enable_deck=params.enable_deck,
        )

    @contextlib.contextmanager
    def enter(self) -> Iterator[Any]:
        """Make this context current in this process (as kfpytorch's Elastic does for its workers)."""
        from flytekit import FlyteContextManager
        from flytekit.core.context_manager import ExecutionParameters
        from flytekit.core.data_persistence import FileAccessProvider
        from flytekit.core.mock_stats import MockStats
        from flytekit.loggers import user_space_logger

        ctx = FlyteContextManager.current_context()
        params = ExecutionParameters(
            execution_date=self.execution_date,
            tmp_dir=self.working_directory,
            stats=MockStats(),
            execution_id=self.execution_id,
            logging=user_space_logger,
            raw_output_prefix=self.raw_output_prefix,
            checkpoint=self.checkpoint,
            task_id=self.task_id,
            enable_deck=self.enable_deck,
        )
        file_access = FileAccessProvider(
            local_sandbox_dir=tempfile.mkdtemp(prefix="flyte-rank-"), raw_output_prefix=self.raw_output_prefix
        )
        state = ctx.new_execution_state().with_params(mode=self.mode, user_space_params=params)
        with FlyteContextManager.with_context(
            ctx.with_file_access(file_access).with_execution_state(state)
        ) as new_ctx:
            yield new_ctx


@dataclass
class RankJob:
    """Everything one rank runs: the pickled function, its kwargs and where to report a failure."""

    fn: bytes
    kwargs: Dict[str, Any]
    failure_dir: str
    settings: Horovod
    flyte: Optional[FlyteRankContext] = None
    all_ranks: bool = False
    init_horovod: bool = True


@dataclass
class RankResult:
    """What a rank sends back: its return value and, from rank 0, the Flyte decks it made."""

    value: Any
    decks: List[Any] = field(default_factory=list)


def start_rank(settings: Horovod, init_horovod: bool = True) -> Tuple[int, int]:
    """Prepare this process as one Horovod rank: rank-prefixed logs, the settings, ``hvd.init()``."""
    os.environ[SETTINGS_ENV] = settings.to_json()
    os.environ.update(settings.env())
    rank, size = launched_rank() or 0, launched_size() or 1
    if init_horovod:
        import horovod.tensorflow as hvd

        hvd.init()
        rank, size = hvd.rank(), hvd.size()
    configure_rank_logging(rank, size)
    if rank == 0:
        logger.info("Horovod world of %d ranks, controller %s, settings %s", size, settings.controller, settings.env())
    return rank, size


def run_rank_in_world(fn: Callable, kwargs: Dict[str, Any], settings: Horovod) -> Any:
    """Run ``fn`` once in this process, one rank of a world a launcher (mpirun, horovodrun) already started."""
    start_rank(settings)
    return fn(**kwargs)


def run_rank(job: RankJob) -> Optional[RankResult]:
    """The entry point of every rank this runtime launches (runs in the rank's own process)."""
    rank = launched_rank() or 0
    try:
        rank, _ = start_rank(job.settings, job.init_horovod)
        fn = cloudpickle.loads(job.fn)
        if job.flyte is None:
            value, decks = fn(**job.kwargs), []
        else:
            with job.flyte.enter() as ctx:
                value = fn(**job.kwargs)
                decks = list(ctx.user_space_params.decks)
        if rank == 0:
            return RankResult(value, decks)
        return RankResult(value) if job.all_ranks else None
    except BaseException as exc:  # report, then let the launcher see the failure
        record_failure(job.failure_dir, rank, exc)
        raise


def record_failure(failure_dir: str, rank: int, exc: BaseException) -> None:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    with fsspec.open(f"{failure_dir}/rank-{rank}.txt", "w") as f:
        f.write(f"{time.time()}\n{text}")


def failure_report(failure_dir: str, launcher_error: BaseException) -> RankFailedError:
    """Turn the failure files the ranks wrote into one error naming the first rank that failed."""
    fs, _, (root,) = fsspec.get_fs_token_paths(failure_dir)
    failures = []
    for path in fs.glob(f"{root}/rank-*.txt") if fs.exists(root) else []:
        stamp, _, text = fs.cat(path).decode().partition("\n")
        rank = int(path.rsplit("rank-", 1)[1].split(".")[0])
        failures.append((float(stamp), rank, text))
    if not failures:
        return RankFailedError(f"Horovod job failed before any rank reported an error: {launcher_error}")
    failures.sort()
    _, rank, text = failures[0]
    others = [str(r) for _, r, _ in failures[1:]]
    also = f" ({'rank' if len(others) == 1 else 'ranks'} {', '.join(others)} failed after it)" if others else ""
    return RankFailedError(f"Horovod rank {rank} failed{also}:\n{text}")


@contextlib.contextmanager
def _environ(env: Dict[str, str]) -> Iterator[None]:
    """Set environment variables for the ranks a launcher starts (horovod.runner.run copies os.environ)."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _import_path(fn: Callable) -> str:
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
    system = (sys.prefix, sys.base_prefix)
    roots += [p for p in sys.path if p and os.path.isdir(p) and not p.startswith(system)]
    roots += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(roots))


def _rank_job(fn: Callable, kwargs: Dict[str, Any], failure_dir: str, settings: Horovod, **options) -> RankJob:
    return RankJob(cloudpickle.dumps(fn), dict(kwargs), failure_dir, settings, **options)


def run_local(
    fn: Callable,
    kwargs: Optional[Dict[str, Any]] = None,
    num_proc: int = 2,
    settings: Optional[Horovod] = None,
    flyte: Optional[FlyteRankContext] = None,
    all_ranks: bool = False,
) -> List[Optional[RankResult]]:
    """Run ``fn(**kwargs)`` on ``num_proc`` Horovod ranks on this host (``horovod.runner.run``).

    Returns one entry per rank (``None`` for ranks other than 0 unless ``all_ranks``). Raises
    ``RankFailedError`` naming the first failed rank and its traceback; no rank is left running.
    """
    import horovod.runner

    settings = settings or Horovod()
    if num_proc < 1:
        raise ValueError(f"num_proc={num_proc}: a Horovod job needs at least one rank")
    failure_dir = tempfile.mkdtemp(prefix="horovod-failures-")
    job = _rank_job(fn, kwargs or {}, failure_dir, settings, flyte=flyte, all_ranks=all_ranks)
    logger.info("launching %d Horovod ranks on localhost (controller %s, settings %s)", num_proc,
                settings.controller, settings.env())
    started = time.monotonic()
    try:
        with _environ({**settings.env(), "PYTHONUNBUFFERED": "1", "PYTHONPATH": _import_path(fn)}):
            results = horovod.runner.run(
                run_rank,
                args=(job,),
                num_proc=num_proc,
                hosts=f"localhost:{num_proc}",
                start_timeout=settings.start_timeout,
                use_gloo=settings.controller == "gloo",
                use_mpi=settings.controller == "mpi",
                mpi_args="--allow-run-as-root --oversubscribe" if settings.controller == "mpi" else None,
                verbose=2 if settings.verbose else None,
                disable_cache=True,
            )
    except Exception as exc:
        raise failure_report(failure_dir, exc) from None
    finally:
        shutil.rmtree(failure_dir, ignore_errors=True)
    logger.info("%d Horovod ranks finished in %.1f s", num_proc, time.monotonic() - started)
    return results


def spark_slots(spark) -> int:
    """Spark task slots available at once: ``local[N]`` threads, or executors x (cores // cpus per task)."""
    sc = spark.sparkContext
    conf = sc.getConf()
    task_cpus = int(conf.get("spark.task.cpus", "1"))
    local = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", sc.master)
    if local:
        threads = local.group(1) or "1"
        return (os.cpu_count() or 1 if threads == "*" else int(threads)) // task_cpus
    executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # the driver is counted too
    return executors * (int(conf.get("spark.executor.cores", "1")) // task_cpus)


def wait_for_slots(spark, num_proc: int, timeout: float) -> None:
    """Wait (up to ``timeout`` s) until Spark can run ``num_proc`` tasks at once, or say clearly that it cannot."""
    deadline = time.monotonic() + timeout
    while (slots := spark_slots(spark)) < num_proc:
        if time.monotonic() > deadline:
            conf = spark.sparkContext.getConf()
            raise NotEnoughSlotsError(
                f"Spark gives {slots} task slot(s) (master {spark.sparkContext.master}, spark.executor.instances="
                f"{conf.get('spark.executor.instances', 'unset')}, spark.executor.cores="
                f"{conf.get('spark.executor.cores', 'unset')}, spark.task.cpus={conf.get('spark.task.cpus', '1')}) "
                f"after {timeout:.0f} s; Horovod needs {num_proc} at once, one Spark task per rank"
            )
        time.sleep(1)


def run_on_spark(
    fn: Callable,
    kwargs: Optional[Dict[str, Any]],
    num_proc: int,
    settings: Horovod,
    spark,
    failure_dir: str,
    all_ranks: bool = False,
) -> List[Optional[RankResult]]:
    """Run ``fn(**kwargs)`` on ``num_proc`` ranks, one Spark task each (``horovod.spark.run``).

    ``failure_dir`` must be reachable from the executors (a local path in local mode, else a remote URL).
    """
    import horovod.spark

    wait_for_slots(spark, num_proc, settings.start_timeout)
    job = _rank_job(fn, kwargs or {}, failure_dir, settings, all_ranks=all_ranks)
    env = {**settings.env(), "PYTHONUNBUFFERED": "1"}
    if spark.sparkContext.master.startswith("local"):
        env["PYTHONPATH"] = _import_path(fn)
    logger.info("launching %d Horovod ranks as Spark tasks (controller %s, settings %s)", num_proc,
                settings.controller, settings.env())
    started = time.monotonic()
    try:
        results = horovod.spark.run(
            run_rank,
            args=(job,),
            num_proc=num_proc,
            start_timeout=settings.start_timeout,
            use_gloo=settings.controller == "gloo",
            use_mpi=settings.controller == "mpi",
            extra_mpi_args="--allow-run-as-root" if settings.controller == "mpi" else None,
            env=env,
            verbose=2 if settings.verbose else 1,
        )
    except Exception as exc:
        raise failure_report(failure_dir, exc) from None
    finally:
        fs, _, (root,) = fsspec.get_fs_token_paths(failure_dir)
        if fs.exists(root):
            fs.rm(root, recursive=True)
    logger.info("%d Horovod ranks on Spark finished in %.1f s", num_proc, time.monotonic() - started)
    return results
