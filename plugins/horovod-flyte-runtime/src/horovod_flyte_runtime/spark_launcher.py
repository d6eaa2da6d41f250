"""Running a function on N Horovod ranks as Spark tasks, one rank per task.

Controller ``gloo``: one barrier-mode Spark stage of N tasks. The driver serves Horovod's Gloo rendezvous; every
task reads all tasks' hosts from its barrier context, derives the same slot plan, reports it to the rendezvous
server (the first report initialises it, later ones cannot disturb ranks that started), and starts its rank
process with Horovod's environment contract. The job goes to the rank on its standard input and the result comes
back through a pipe, so nothing is left on the executors' disks. The driver watches the failure folder and cancels
the stage as soon as a rank reports a failure. Controller ``mpi``: ``horovod.spark.run`` (mpirun through its task
services).
"""

import contextlib
import logging
import os
import re
import socket
import sys
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import cloudpickle

from . import _shims
from .failures import RankFailures
from .gloo import start_rendezvous, stop_soon
from .job_secret import job_secret, with_job_secret
from .loopback import LOOPBACK, LOOPBACK_ENV
from .noise import quiet_env
from .processes import SETTLE_S
from .rank import RankJob, RankResult, import_path, run_rank
from .rank_output import RankOutput
from .settings import Horovod
from .spark_barrier_task import barrier_rank

logger = logging.getLogger("flytekitplugins.horovod")


class NotEnoughSlotsError(RuntimeError):
    """Spark cannot run one task per Horovod rank at once."""


def spark_slots(spark) -> int:
    """Spark task slots available at once: ``local[N]`` threads, or executors x (cores // cpus per task)."""
    sc = spark.sparkContext
    conf = sc.getConf()
    task_cpus = int(conf.get("spark.task.cpus", "1"))
    local = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", sc.master)
    if local:
        threads = local.group(1) or "1"
        return (os.cpu_count() or 1 if threads == "*" else int(threads)) // task_cpus
    return _shims.executor_count(sc) * (int(conf.get("spark.executor.cores", "1")) // task_cpus)


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


def horovod_spark_options(settings: Horovod, num_proc: int, env: Optional[Dict[str, str]] = None,
                          output: Optional[RankOutput] = None) -> Dict[str, Any]:
    """The keyword arguments ``horovod.spark.run`` and ``SparkBackend`` share, for these settings and ranks; the
    ranks' output goes to ``output`` when given."""
    options: Dict[str, Any] = dict(
        num_proc=num_proc,
        env=env if env is not None else settings.env(),
        start_timeout=settings.start_timeout,
        use_gloo=settings.controller == "gloo",
        use_mpi=settings.controller == "mpi",
        verbose=2 if settings.verbose else 1,
    )
    if settings.controller == "mpi":
        options["extra_mpi_args"] = "--allow-run-as-root"
    if output is not None:
        options.update(stdout=output.stream("stdout"), stderr=output.stream("stderr"))
    return options


def run_on_spark(
    fn: Callable,
    kwargs: Optional[Dict[str, Any]],
    num_proc: int,
    settings: Horovod,
    spark,
    failure_dir: str,
    all_ranks: bool = False,
    env: Optional[Dict[str, str]] = None,
    output: Optional[RankOutput] = None,
) -> List[Optional[RankResult]]:
    """Run ``fn(**kwargs)`` on ``num_proc`` ranks, one Spark task each; one entry per rank (see module doc).

    ``failure_dir`` must be reachable from the executors (a local path in local mode, else a remote URL). ``env`` is
    added to the ranks' environment. The ranks' lines go to ``output`` where it can reach them (the ``mpi``
    controller's launcher, and the Gloo ranks of a local session, which append to its log file); else the Gloo ranks
    print where their Spark tasks run (an executor's log on a cluster).
    """
    settings = settings.for_body(fn)
    settings.check_before_launch()
    wait_for_slots(spark, num_proc, settings.start_timeout)
    failures = RankFailures(failure_dir)
    job = RankJob.of(fn, kwargs, failure_dir, settings, all_ranks=all_ranks)
    sc = spark.sparkContext
    local_mode = sc.master.startswith("local")
    # epoch lines as they happen; a new job secret for the slot plan and the ranks' liveness hellos
    env = with_job_secret({**settings.env(), **quiet_env(settings.verbose), **(env or {}), "PYTHONUNBUFFERED": "1"})
    if local_mode:  # every listener of the ranks on loopback; where fn's module imports from, and the session's
        # Python workers' path (the task's module)
        env[LOOPBACK_ENV] = "1"
        paths = (*import_path(fn).split(os.pathsep), *sc.environment.get("PYTHONPATH", "").split(os.pathsep))
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    logger.info("launching %d Horovod ranks as Spark tasks (controller %s)", num_proc, settings.controller)
    started = time.monotonic()
    try:
        if settings.controller == "mpi":
            import horovod.spark

            launch_output = output or RankOutput.for_launch(settings.verbose)
            try:
                results = horovod.spark.run(run_rank, args=(job,),
                                            **horovod_spark_options(settings, num_proc, env, launch_output))
            finally:
                if output is None:
                    launch_output.close()
        else:
            log = (output.path, output.verbose) if output is not None and local_mode else None
            results = _run_barrier_stage(sc, cloudpickle.dumps(job), num_proc, env, local_mode, failures,
                                         settings.verbose, log)
    except Exception as exc:
        raise failures.error(exc) from None
    finally:
        failures.clear()
    logger.info("%d Horovod ranks on Spark finished in %.1f s", num_proc, time.monotonic() - started)
    return results


def _run_barrier_stage(sc, job: bytes, num_proc: int, env: Dict[str, str], local_mode: bool,
                       failures: RankFailures, verbose: bool,
                       log: Optional[Tuple[str, bool]] = None) -> List[Optional[RankResult]]:
    """One barrier stage of ``num_proc`` tasks, each running one Gloo rank; results by rank. With ``log`` (a log
    file on this machine, and whether every rank's lines go to the console), the ranks' lines go there as a
    ``RankOutput`` of that file shows them."""
    group = f"flytekitplugins-horovod-{uuid.uuid4().hex}"
    address = LOOPBACK if local_mode else socket.gethostbyname(sc.getConf().get("spark.driver.host"))
    rendezvous, port = start_rendezvous(verbose, host=LOOPBACK if local_mode else "", key=job_secret(env))
    if verbose:
        print(f"[horovod launcher] rendezvous at {address}:{port}; {num_proc} barrier tasks", file=sys.stderr)
    outcome: Dict[str, Any] = {}

    def barrier_task(_):
        yield barrier_rank(job, env, local_mode, address, port, failures.folder, log)

    def stage() -> None:
        try:
            sc.setJobGroup(group, f"Horovod: {num_proc} ranks", interruptOnCancel=True)
            rdd = sc.parallelize(range(num_proc), num_proc).barrier().mapPartitions(barrier_task)
            with _pickled_by_value():
                rdd._jrdd  # pickles the tasks' code now, self-contained
            outcome["rows"] = rdd.collect()
        except BaseException as exc:  # reported below, in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=stage, name="horovod-spark-stage", daemon=True)
    poll = 0.1 if "file" in _protocols(failures.fs) else 1.0  # a local folder is cheap to look at; a bucket is not
    failed_at = None
    try:
        thread.start()
        while thread.is_alive():
            thread.join(poll)
            if thread.is_alive() and failures.any():
                # cancel once the rank that failed first has said why (an echo's record may come first), or after
                # SETTLE_S: a cancelled task cannot record its rank's exit any more
                failed_at = failed_at or time.monotonic()
                if failures.has_cause() or time.monotonic() - failed_at > SETTLE_S:
                    logger.info("a Horovod rank failed; cancelling the other ranks' Spark tasks")
                    sc.cancelJobGroup(group)
                    thread.join()
    except BaseException:  # Ctrl-C
        logger.warning("interrupted: cancelling the Spark tasks of %d Horovod ranks", num_proc)
        sc.cancelJobGroup(group)
        raise
    finally:
        stop_soon(rendezvous)
    if "error" in outcome:
        raise outcome["error"]
    results: List[Optional[RankResult]] = [None] * num_proc
    for rank, code, data in outcome["rows"]:
        if code != 0:
            raise RuntimeError(f"Horovod rank {rank} exited with status {code}")
        results[rank] = cloudpickle.loads(data) if data else None
    return results


def _protocols(fs) -> Tuple[str, ...]:
    return tuple(fs.protocol) if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)


_BY_VALUE_LOCK = threading.Lock()
# What the barrier tasks run: this package (cloudpickle takes a package's submodules with it), pickled by value, so a
# Spark worker runs the driver's own copy and needs no plugin installed beside Horovod. The package imports no flytekit
# (tests/plugin/test_no_flytekit.py), and the barrier code refers to its functions by name, never to a module object
# (that would pickle it whole).
_BY_VALUE = (sys.modules[__package__],)


@contextlib.contextmanager
def _pickled_by_value() -> Iterator[None]:
    """Make Spark's cloudpickle pickle ``_BY_VALUE``'s functions by value while it serialises a stage's code."""
    try:
        from pyspark.cloudpickle import (
            list_registry_pickle_by_value,
            register_pickle_by_value,
            unregister_pickle_by_value,
        )
    except ImportError:
        yield
        return
    with _BY_VALUE_LOCK:
        added = [m for m in _BY_VALUE if m.__name__ not in list_registry_pickle_by_value()]
        for module in added:
            register_pickle_by_value(module)
        try:
            yield
        finally:
            for module in added:
                unregister_pickle_by_value(module)
