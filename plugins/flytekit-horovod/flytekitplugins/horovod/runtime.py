"""The Horovod runtime: launch ranks (locally or on Spark), run a function in each, return rank 0's result.

Launching is lean on purpose (see docs/performance.md): a local run starts the rank processes itself and
gives them Horovod's own environment contract (``HOROVOD_RANK`` ..., ``HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT``
served by Horovod's ``RendezvousServer``), or runs ``mpirun`` for the MPI controller; the Spark route runs
one barrier-mode Spark task per rank, each starting its rank process directly. Every rank is
``python -c "...; _rank_main()" JOB RESULTS``: it loads the pickled job, runs it after ``hvd.init()``,
writes its result to a file and exits without the interpreter's slow teardown.

One failure path for every launcher: a rank that raises writes its traceback to a failure folder before it
exits; the launcher's generic "a process exited with non-zero status" becomes a ``RankFailedError`` that
names the first rank that failed and shows its traceback. No rank outlives its launcher.
"""

import atexit
import codecs
import collections
import contextlib
import functools
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Tuple

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


# --- rank processes ---------------------------------------------------------------------------------------

# How every rank process starts: this module's ``_rank_main`` with the job file and the results folder.
RANK_ENTRY = "from flytekitplugins.horovod.runtime import _rank_main; _rank_main()"
PARENT_PID_ENV = "FLYTE_HOROVOD_PARENT_PID"  # the launcher of a rank process; the rank exits when it is gone
GRACE_SECONDS = 5.0  # SIGTERM, then this long, then SIGKILL (horovod's safe_shell_exec waits as long)
_PR_SET_PDEATHSIG = 1


def _pdeathsig_setter(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A function that asks Linux to send ``sig`` to the calling process when its parent dies.

    Resolved here (ctypes loaded, symbol looked up) so that calling it in a forked child before ``exec``
    needs no import and no lock. A no-op where ``prctl`` is unavailable.
    """
    if not sys.platform.startswith("linux"):
        return lambda: None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return lambda: None
    return lambda: prctl(_PR_SET_PDEATHSIG, int(sig))


def _exit_now(code: int) -> None:
    """Exit at once after the atexit handlers (``hvd.shutdown``, logging) ran: no interpreter teardown.

    Tearing down an interpreter that imported TensorFlow takes about a second per rank, and the launcher
    (and the task) waits for it; nothing in it matters once the result is written and the streams flushed.
    """
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _rank_main(argv: Optional[Sequence[str]] = None) -> None:
    """The entry point of every rank process: ``python -c RANK_ENTRY JOB_FILE RESULT_DIR``.

    Runs the pickled ``RankJob`` (``run_rank``: ``hvd.init()``, the function, failure report) and writes a
    non-``None`` result to ``RESULT_DIR/result-<rank>.pkl``. Exit status 0 on success, 1 when it failed.
    """
    _pdeathsig_setter()()
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and os.getppid() != int(parent):  # the launcher died before the line above took effect
        os._exit(1)
    job_path, result_dir = (argv or sys.argv)[1:3]
    code = 0
    try:
        with open(job_path, "rb") as f:
            job = cloudpickle.load(f)
        result = run_rank(job)
        if result is not None:
            rank = launched_rank() or 0
            _write_file(os.path.join(result_dir, f"result-{rank}.pkl"), cloudpickle.dumps(result))
    except BaseException:
        traceback.print_exc()
        code = 1
    _exit_now(code)


def _write_file(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _read_results(result_dir: str, num_proc: int) -> List[Optional["RankResult"]]:
    results: List[Optional[RankResult]] = []
    for rank in range(num_proc):
        path = os.path.join(result_dir, f"result-{rank}.pkl")
        if os.path.exists(path):
            with open(path, "rb") as f:
                results.append(cloudpickle.load(f))
        else:
            results.append(None)
    return results


def _rank_command(job_path: str, result_dir: str, executable: Optional[str] = None) -> List[str]:
    return [executable or sys.executable, "-c", RANK_ENTRY, job_path, result_dir]


class _Processes:
    """The processes of one launch: output forwarded line by line (with a prefix), stopped together.

    Every process gets its own session, so stopping it stops whatever it started too.
    """

    def __init__(self):
        self.procs: List[subprocess.Popen] = []
        self.names: List[str] = []
        self.tails: List[Deque[str]] = []
        self._threads: List[threading.Thread] = []

    def start(self, name: str, args: List[str], env: Dict[str, str], prefix: Optional[str],
              die_with_parent: bool = False) -> subprocess.Popen:
        """Start one process; ``prefix`` (e.g. ``"[1]"``) makes its lines ``[1]<stdout>:...`` as horovodrun's."""
        preexec = _pdeathsig_setter() if die_with_parent else None  # for a launcher that is not Python (mpirun)
        proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec)
        tail: Deque[str] = collections.deque(maxlen=40)
        self.procs.append(proc)
        self.names.append(name)
        self.tails.append(tail)
        for pipe, stream in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
            tag = f"{prefix}<{stream}>:" if prefix is not None else ""
            thread = threading.Thread(target=_forward, args=(pipe, stream, tag, tail), daemon=True,
                                      name=f"horovod-{name}-{stream}")
            thread.start()
            self._threads.append(thread)
        return proc

    def wait(self, poll: float = 0.02) -> Optional[Tuple[int, int]]:
        """Wait until all exited; at the first non-zero exit stop the others and return (index, exit code)."""
        try:
            while True:
                codes = [p.poll() for p in self.procs]
                failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
                if failed:
                    self.stop()
                    return failed[0]
                if all(c == 0 for c in codes):
                    return None
                time.sleep(poll)
        finally:
            self.stop()

    def stop(self, grace: float = GRACE_SECONDS) -> None:
        """SIGTERM every process group still running, SIGKILL after ``grace`` s; finish forwarding output."""
        alive = [p for p in self.procs if p.poll() is None]
        for proc in alive:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            _signal_group(proc, signal.SIGKILL)  # also anything a finished process left behind
            if proc.poll() is None:
                proc.wait()
        for thread in self._threads:
            thread.join(timeout=2)

    def describe_exit(self, index: int, code: int) -> str:
        tail = "".join(self.tails[index]).rstrip()
        text = f"{self.names[index]} exited with status {code}"
        return f"{text}; its last output:\n{tail}" if tail else text


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _forward(pipe, stream: str, tag: str, tail: Deque[str]) -> None:
    """Copy a child's output to this process's ``sys.stdout``/``sys.stderr``, each line tagged.

    Lines end at ``\n`` or ``\r`` (as in horovod's own forwarding), so progress bars stay live.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    fd = pipe.fileno()
    with pipe:
        while True:
            chunk = os.read(fd, 65536)
            parts = re.split("([\r\n])", pending + decoder.decode(chunk, final=not chunk))
            pending = parts.pop()
            lines = ["".join(parts[i:i + 2]) for i in range(0, len(parts), 2)]
            if not chunk and pending:
                lines.append(pending)
            if lines:
                tail.extend(lines)
                target = getattr(sys, stream)
                with contextlib.suppress(Exception):
                    target.write("".join(tag + line for line in lines))
                    target.flush()
            if not chunk:
                return


def _loopback_interface() -> str:
    """The name of the interface that holds 127.0.0.1 (``lo`` on Linux)."""
    return _interface_of("127.0.0.1") or "lo"


def _interface_of(ip: str) -> Optional[str]:
    """The network interface holding ``ip`` on this host, if any."""
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == ip for a in addresses):
            return name
    return None


def _stop_soon(rendezvous) -> None:
    """Stop a rendezvous server without waiting: its loop notices only every half second."""
    threading.Thread(target=rendezvous.stop, name="horovod-rendezvous-stop", daemon=True).start()


def gloo_rank_env(slot, rendezvous_addr: str, rendezvous_port: int, iface: str) -> Dict[str, str]:
    """Horovod's environment contract for one Gloo rank (what ``horovodrun --gloo`` gives each process)."""
    from horovod.runner.gloo_run import create_run_env_vars, create_slot_env_vars

    env = create_run_env_vars(rendezvous_addr, [iface], rendezvous_port)
    env.update(create_slot_env_vars(slot))
    return {k: str(v) for k, v in env.items()}


def mpirun_command(num_proc: int, env_names: Sequence[str], command: List[str]) -> List[str]:
    """``mpirun`` for ``num_proc`` ranks on this host.

    horovodrun's Open MPI flags, except the transports: on one host ``self,vader,tcp`` (shared memory)
    instead of ``^openib``, which also loads the libfabric transport whose shutdown takes a second.
    """
    args = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--tag-output", "-np", str(num_proc),
            "-H", f"localhost:{num_proc}", "-bind-to", "none", "-map-by", "slot", "-mca", "pml", "ob1",
            "-mca", "btl", "self,vader,tcp"]
    for name in env_names:
        args += ["-x", name]
    return args + command


def run_local(
    fn: Callable,
    kwargs: Optional[Dict[str, Any]] = None,
    num_proc: int = 2,
    settings: Optional[Horovod] = None,
    flyte: Optional[FlyteRankContext] = None,
    all_ranks: bool = False,
) -> List[Optional[RankResult]]:
    """Run ``fn(**kwargs)`` on ``num_proc`` Horovod ranks on this host.

    Controller ``gloo``: the rank processes are started here with Horovod's Gloo environment and a Horovod
    ``RendezvousServer`` in this process (what ``horovodrun --gloo`` does, without its host checks and
    per-rank middleman processes). Controller ``mpi``: ``mpirun`` starts them. Output lines are prefixed by
    rank (``[r]<stdout>:`` for Gloo, ``mpirun --tag-output``'s ``[1,r]<stdout>:`` for MPI).

    Returns one entry per rank (``None`` for ranks other than 0 unless ``all_ranks``). Raises
    ``RankFailedError`` naming the first failed rank and its traceback; no rank is left running.
    """
    settings = settings or Horovod()
    if num_proc < 1:
        raise ValueError(f"num_proc={num_proc}: a Horovod job needs at least one rank")
    job_dir = tempfile.mkdtemp(prefix="horovod-job-")
    job = _rank_job(fn, kwargs or {}, job_dir, settings, flyte=flyte, all_ranks=all_ranks)
    job_path = os.path.join(job_dir, "job.pkl")
    _write_file(job_path, cloudpickle.dumps(job))
    extra = {**settings.env(), "PYTHONUNBUFFERED": "1", "PYTHONPATH": _import_path(fn)}
    env = {**os.environ, **extra}
    command = _rank_command(job_path, job_dir)
    logger.info("launching %d Horovod ranks on localhost (controller %s, settings %s)", num_proc,
                settings.controller, settings.env())
    started = time.monotonic()
    processes = _Processes()
    rendezvous = None
    try:
        if settings.controller == "mpi":
            args = mpirun_command(num_proc, sorted(extra), command)
            if settings.verbose:
                logger.info("running %s", " ".join(args))
            processes.start("mpirun", args, env, prefix=None, die_with_parent=True)
        else:
            from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
            from horovod.runner.http.http_server import RendezvousServer

            rendezvous = RendezvousServer(verbose=1 if settings.verbose else 0)
            plan = get_host_assignments(parse_hosts(f"localhost:{num_proc}"), num_proc)
            port = rendezvous.start()
            rendezvous.init(plan)
            iface = _loopback_interface()
            for slot in plan:
                rank_env = {**env, **gloo_rank_env(slot, "127.0.0.1", port, iface), PARENT_PID_ENV: str(os.getpid())}
                if settings.verbose:
                    logger.info("rank %d: %s", slot.rank, " ".join(command))
                processes.start(f"rank {slot.rank}", command, rank_env, prefix=f"[{slot.rank}]")
        failed = processes.wait()
        if failed is not None:
            raise RuntimeError(processes.describe_exit(*failed))
        results = _read_results(job_dir, num_proc)
    except BaseException as exc:
        processes.stop()
        if isinstance(exc, Exception):
            raise failure_report(job_dir, exc) from None
        raise
    finally:
        if rendezvous is not None:
            _stop_soon(rendezvous)
        shutil.rmtree(job_dir, ignore_errors=True)
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
    """Run ``fn(**kwargs)`` on ``num_proc`` ranks, one Spark task each.

    Controller ``gloo``: one barrier-mode Spark stage of ``num_proc`` tasks. The driver serves Horovod's Gloo
    rendezvous; every task reads all tasks' hosts from its barrier context, derives the same slot plan, and
    starts its rank process at once with Horovod's environment contract. The driver watches ``failure_dir``
    and cancels the stage as soon as a rank reports a failure. Controller ``mpi``: ``horovod.spark.run``
    (mpirun through its task services).

    ``failure_dir`` must be reachable from the executors (a local path in local mode, else a remote URL).
    """
    wait_for_slots(spark, num_proc, settings.start_timeout)
    job = _rank_job(fn, kwargs or {}, failure_dir, settings, all_ranks=all_ranks)
    sc = spark.sparkContext
    local_mode = sc.master.startswith("local")
    env = {**settings.env(), "PYTHONUNBUFFERED": "1"}
    if local_mode:
        env["PYTHONPATH"] = _import_path(fn)
    logger.info("launching %d Horovod ranks as Spark tasks (controller %s, settings %s)", num_proc,
                settings.controller, settings.env())
    started = time.monotonic()
    try:
        if settings.controller == "mpi":
            results = _horovod_spark_run(job, num_proc, settings, env)
        else:
            results = _run_barrier_stage(sc, cloudpickle.dumps(job), num_proc, env, local_mode, failure_dir,
                                         settings.verbose)
    except Exception as exc:
        raise failure_report(failure_dir, exc) from None
    finally:
        fs, _, (root,) = fsspec.get_fs_token_paths(failure_dir)
        if fs.exists(root):
            fs.rm(root, recursive=True)
    logger.info("%d Horovod ranks on Spark finished in %.1f s", num_proc, time.monotonic() - started)
    return results


def _horovod_spark_run(job: RankJob, num_proc: int, settings: Horovod, env: Dict[str, str]) -> List[Any]:
    import horovod.spark

    return horovod.spark.run(
        run_rank,
        args=(job,),
        num_proc=num_proc,
        start_timeout=settings.start_timeout,
        use_gloo=False,
        use_mpi=True,
        extra_mpi_args="--allow-run-as-root",
        env=env,
        verbose=2 if settings.verbose else 1,
    )


def _run_barrier_stage(sc, job: bytes, num_proc: int, env: Dict[str, str], local_mode: bool, failure_dir: str,
                       verbose: bool) -> List[Optional[RankResult]]:
    """One barrier stage of ``num_proc`` tasks, each running one Gloo rank; results by rank.

    The driver serves Horovod's Gloo rendezvous for the whole stage. Barrier mode schedules all tasks at
    once and tells each task every task's host (``getTaskInfos``), so each computes the same slot plan
    without a Spark barrier round (about a second each); the first task to send the plan has the
    rendezvous server initialised with it before any rank process starts.
    """
    from horovod.runner.http.http_server import RendezvousServer

    group = f"flytekitplugins-horovod-{uuid.uuid4().hex}"
    rendezvous = RendezvousServer(verbose=1 if verbose else 0)
    port = rendezvous.start(_plan_handler_class())
    address = "127.0.0.1" if local_mode else socket.gethostbyname(sc.getConf().get("spark.driver.host"))
    mapper = _barrier_mapper(job, env, local_mode, address, port, failure_dir, verbose)
    outcome: Dict[str, Any] = {}

    def stage() -> None:
        try:
            sc.setJobGroup(group, f"Horovod: {num_proc} ranks", interruptOnCancel=True)
            rdd = sc.parallelize(range(num_proc), num_proc).barrier().mapPartitions(mapper)
            with _pickled_by_value():
                rdd._jrdd  # pickles the tasks' code now, self-contained
            outcome["rows"] = rdd.collect()
        except BaseException as exc:  # reported below, in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=stage, name="horovod-spark-stage", daemon=True)
    fs, _, (root,) = fsspec.get_fs_token_paths(failure_dir)
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    poll = 0.1 if "file" in protocols else 1.0  # a local folder is cheap to look at; an object store is not
    try:
        thread.start()
        while thread.is_alive():
            thread.join(poll)
            if thread.is_alive() and fs.exists(root) and fs.glob(f"{root}/rank-*.txt"):
                logger.info("a Horovod rank failed; cancelling the other ranks' Spark tasks")
                sc.cancelJobGroup(group)
                thread.join()
    except BaseException:
        sc.cancelJobGroup(group)
        raise
    finally:
        _stop_soon(rendezvous)
    if "error" in outcome:
        raise outcome["error"]
    results: List[Optional[RankResult]] = [None] * num_proc
    for rank, code, data in outcome["rows"]:
        if code != 0:
            raise RuntimeError(f"Horovod rank {rank} exited with status {code}")
        results[rank] = cloudpickle.loads(data) if data is not None else None
    return results


_BY_VALUE_LOCK = threading.Lock()


@contextlib.contextmanager
def _pickled_by_value() -> Iterator[None]:
    """Make Spark pickle this module's functions by value while it serialises a stage's code.

    The tasks then run this module's code without importing the package, which imports flytekit and takes
    a second in every Spark Python worker the first time. What the tasks use needs only the standard
    library, fsspec, psutil, pyspark and horovod.runner. Without the pickler's registry, nothing changes.
    """
    try:
        from pyspark.cloudpickle import (list_registry_pickle_by_value, register_pickle_by_value,
                                         unregister_pickle_by_value)
    except ImportError:
        yield
        return
    module = sys.modules[__name__]
    with _BY_VALUE_LOCK:
        registered = module.__name__ in list_registry_pickle_by_value()
        if not registered:
            register_pickle_by_value(module)
        try:
            yield
        finally:
            if not registered:
                unregister_pickle_by_value(module)


PLAN_SCOPE = "flytekitplugins_horovod_plan"


@functools.lru_cache(maxsize=None)
def _plan_handler_class():
    from horovod.runner.http.http_server import RendezvousHandler

    class PlanRendezvousHandler(RendezvousHandler):
        """Horovod's rendezvous handler; a PUT to ``/PLAN_SCOPE/hosts`` (the task hosts as JSON, one per
        task) initialises the server with that slot plan, once, before the PUT is answered."""

        def do_PUT(self):
            if not self.path.startswith(f"/{PLAN_SCOPE}/"):
                return super().do_PUT()
            import json

            hosts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with self.server.cache_lock:
                planned = PLAN_SCOPE in self.server.cache
                self.server.cache[PLAN_SCOPE] = {"hosts": b"1"}
            if not planned:
                self.server.init(barrier_plan(hosts)[0])
            self.send_status_code(200)

    return PlanRendezvousHandler


def _barrier_mapper(job: bytes, env: Dict[str, str], local_mode: bool, address: str, port: int,
                    failure_dir: str, verbose: bool):
    def mapper(_):
        yield _barrier_rank(job, env, local_mode, address, port, failure_dir, verbose)

    return mapper


def barrier_plan(hosts: Sequence[str]) -> Tuple[list, list]:
    """Horovod's slot plan for tasks on ``hosts`` (one entry per task), and each task's slot.

    Tasks on one host get consecutive ranks; hosts are ordered by their first task, so task 0 is rank 0.
    """
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts

    order = list(dict.fromkeys(hosts))
    counts = collections.Counter(hosts)
    plan = get_host_assignments(parse_hosts(",".join(f"{h}:{counts[h]}" for h in order)), len(hosts))
    free = {h: [s for s in plan if s.hostname == h] for h in order}
    return plan, [free[h].pop(0) for h in hosts]


def _barrier_rank(job: bytes, extra_env: Dict[str, str], local_mode: bool, address: str, port: int,
                  failure_dir: str, verbose: bool) -> Tuple[int, int, Optional[bytes]]:
    """Body of one barrier task: its slot from every task's host, the plan to the driver, one rank process."""
    import json
    from urllib.request import Request, urlopen

    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    index = ctx.partitionId()
    infos = ctx.getTaskInfos()
    if local_mode:
        hosts = ["127.0.0.1"] * len(infos)
    else:
        hosts = [socket.gethostbyname(info.address.rsplit(":", 1)[0]) for info in infos]
    slot = barrier_plan(hosts)[1][index]
    request = Request(f"http://{address}:{port}/{PLAN_SCOPE}/hosts", data=json.dumps(hosts).encode(), method="PUT")
    urlopen(request, timeout=60).read()  # answered once the rendezvous server has the plan
    iface = _loopback_interface() if local_mode else (_interface_of(hosts[index]) or _default_interface())
    workdir = tempfile.mkdtemp(prefix="horovod-rank-")
    try:
        job_path = os.path.join(workdir, "job.pkl")
        _write_file(job_path, job)
        env = {**os.environ, **extra_env, **gloo_rank_env(slot, address, port, iface),
               PARENT_PID_ENV: str(os.getpid())}
        processes = _Processes()
        processes.start(f"rank {slot.rank}", _rank_command(job_path, workdir), env, prefix=f"[{slot.rank}]")
        failed = processes.wait()
        code = failed[1] if failed else 0
        if failed:
            _ensure_failure_recorded(failure_dir, slot.rank, processes.describe_exit(*failed))
        result_path = os.path.join(workdir, f"result-{slot.rank}.pkl")
        data = None
        if os.path.exists(result_path):
            with open(result_path, "rb") as f:
                data = f.read()
        return slot.rank, code, data
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _ensure_failure_recorded(failure_dir: str, rank: int, text: str) -> None:
    """A rank process that died without writing its failure (killed, crashed) still gets one."""
    fs, _, (root,) = fsspec.get_fs_token_paths(failure_dir)
    if not fs.exists(f"{root}/rank-{rank}.txt"):
        with fsspec.open(f"{failure_dir}/rank-{rank}.txt", "w") as f:
            f.write(f"{time.time()}\n{text}\n")


def _default_interface() -> str:
    """The first interface with a non-loopback IPv4 address (where Gloo listens when nothing else fits)."""
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and not a.address.startswith("127.") for a in addresses):
            return name
    return _loopback_interface()
