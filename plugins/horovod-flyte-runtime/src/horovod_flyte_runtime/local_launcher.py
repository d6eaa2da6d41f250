"""Running a function on N Horovod ranks on this host: Gloo rank processes started directly, or ``mpirun``.

Lean on purpose (see docs/performance.md): for Gloo, this process serves Horovod's own ``RendezvousServer`` and
starts each rank with Horovod's environment contract (what ``horovodrun --gloo`` does, without its host checks and
per-rank middleman processes); for MPI, ``mpirun`` starts them. Each rank writes its result to the job folder.
"""

import logging
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import cloudpickle

from . import gloo
from .artifacts import say_where
from .classify import DIED, mpirun_failed_rank
from .errors import InterruptedByUser, exit_quickly
from .failures import HOST_ENV, RankFailures, this_host
from .flyte_context import FlyteRankContext
from .job_secret import job_secret, with_job_secret
from .launcher_exit import LauncherExitWatch
from .loopback import LOOPBACK, LOOPBACK_ENV
from .noise import quiet_env
from .own_network import HOW_TO_ALLOW, isolation
from .processes import PARENT_PID_ENV, Processes, stopped_by_sigterm
from .rank import RankJob, RankResult, import_path, rank_command, read_results, write_file
from .rank_output import RankOutput
from .settings import Horovod, whole_number

logger = logging.getLogger("flytekitplugins.horovod")


def mpirun_command(num_proc: int, env_names: Sequence[str], command: List[str]) -> List[str]:
    """``mpirun`` for ``num_proc`` ranks on this host.

    horovodrun's Open MPI flags, except the transports: on one host ``self,vader`` (shared memory) instead of
    ``^openib``, which also loads the libfabric transport whose shutdown takes a second, and no TCP transport: Open
    MPI 4.1's binds every address whatever ``btl_tcp_if_include`` says. mpirun's control channel uses the loopback
    interface; it listens on every address, in the job's own network namespace (``own_network``). The environment
    goes by name (``-x NAME``).
    """
    args = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--tag-output", "-np", str(num_proc),
            "-H", f"localhost:{num_proc}", "-bind-to", "none", "-map-by", "slot", "-mca", "pml", "ob1",
            "-mca", "btl", "self,vader", "-mca", "oob_tcp_if_include", "lo"]
    for name in env_names:
        args += ["-x", name]
    return args + command


@stopped_by_sigterm
def run_local(
    fn: Callable,
    kwargs: Optional[Dict[str, Any]] = None,
    num_proc: int = 2,
    settings: Optional[Horovod] = None,
    flyte: Optional[FlyteRankContext] = None,
    all_ranks: bool = False,
    says_where: bool = False,
    on_rank0_line: Optional[Callable[[str], None]] = None,
) -> List[Optional[RankResult]]:
    """Run ``fn(**kwargs)`` on ``num_proc`` Horovod ranks on this host; with ``says_where``, print where the rank log,
    timeline and autotune log are (``artifacts.where_line``), as a Horovod task does; ``on_rank0_line`` gets rank 0's
    lines as they come (``RankOutput``).

    Output lines are prefixed by rank (``[r]<stdout>:`` for Gloo, ``mpirun --tag-output``'s ``[1,r]<stdout>:``);
    rank 0's reach the console, every rank's a log file (``rank_output``).
    Returns one entry per rank (``None`` for ranks other than 0 unless ``all_ranks``). Raises ``RankFailedError``
    (the body raised) or ``RankLostError`` (a rank died) naming the rank, its host and what happened; no rank is
    left running.
    """
    settings = settings or Horovod()
    if says_where:  # no Horovod task around to say it: relative Horovod files land in the current directory
        settings = settings.files_in(os.getcwd())
    if not whole_number(num_proc, at_least=1):
        raise ValueError(f"num_proc={num_proc!r}: a Horovod job needs a whole number of ranks, at least 1")
    job_dir, job_path, failures, extra = _job(fn, kwargs, settings, flyte, all_ranks=all_ranks)
    env = {**os.environ, **extra}
    command = rank_command(job_path, job_dir)
    logger.info("launching %d Horovod ranks on this host (controller %s)", num_proc, settings.controller)
    started = time.monotonic()
    output = RankOutput.for_launch(settings.verbose, on_rank0_line)
    processes = Processes(output)
    rendezvous = None
    try:
        if settings.controller == "mpi":
            enter = _own_network()
            if enter is not None:  # the ranks see no address of this host's: they name it as the launcher does
                host = {HOST_ENV: this_host()}
                extra, env = {**extra, **host}, {**env, **host}
            args = mpirun_command(num_proc, sorted(extra), command)
            _verbose(settings, "running %s%s", " ".join(args), " in a network namespace of its own" if enter else "")
            processes.start("mpirun", args, env, prefix=None, die_with_parent=True, enter=enter)
            exited = LauncherExitWatch(job_dir, "mpirun", num_proc)
            # once mpirun failed, let it finish its closing message: it names the rank that failed first
            failed = processes.wait(on_exit=lambda *_: record_mpirun_failure(processes.finished_output(0), failures,
                                                                             output.last_lines), give_up=exited)
        else:
            exited = LauncherExitWatch(job_dir, "the rank processes", num_proc)
            plan = gloo.host_plan([LOOPBACK] * num_proc)[0]
            rendezvous, port = gloo.start_rendezvous(settings.verbose, plan, host=LOOPBACK, key=job_secret(env))
            iface = gloo.loopback_interface()
            for slot in plan:
                rank_env = {**env, **gloo.rank_env(slot, LOOPBACK, port, iface), PARENT_PID_ENV: str(os.getpid())}
                _verbose(settings, "rank %d: %s", slot.rank, " ".join(command))
                processes.start(f"rank {slot.rank}", command, rank_env, prefix=str(slot.rank))
            failed = processes.wait(on_exit=lambda index, code: failures.record(
                index, DIED, processes.describe_exit(index, code), replace=False), settled=failures.has_cause,
                give_up=exited)
        if gave_up_on(exited, failures):  # every rank returned: its results are there
            failed = None
        if failed is not None:
            raise RuntimeError(processes.describe_exit(*failed))
        results = read_results(job_dir, num_proc)
    except Exception as exc:
        processes.stop()
        raise failures.error(exc) from None
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C, flytekit's SIGINT handler's SystemExit(1), or SIGTERM
        raise interrupted(processes) from None
    finally:
        if rendezvous is not None:
            gloo.stop_soon(rendezvous)
        shutil.rmtree(job_dir, ignore_errors=True)
        output.close()
    logger.info("%d Horovod ranks finished in %.1f s; every rank's output: %s", num_proc, time.monotonic() - started,
                output.path)
    if says_where:
        say_where(getattr(fn, "__name__", "ranks"), settings, [output.path])
    return results


def local_host_names() -> List[str]:
    """Distinct names of this host (each resolves to one of its addresses), to stand for worker hosts in a local
    elastic run: Horovod blacklists a failed worker's whole host, so each worker needs a name of its own."""
    import socket

    from horovod.runner.util.network import get_local_host_addresses, resolve_host_address

    local = get_local_host_addresses()
    names = ["localhost", "127.0.0.1", socket.gethostname(), *sorted(local)]
    return [n for n in dict.fromkeys(names) if resolve_host_address(n) in local]


@stopped_by_sigterm
def run_local_elastic(
    fn: Callable,
    kwargs: Optional[Dict[str, Any]],
    workers: int,
    min_workers: int,
    max_workers: int,
    slots: int,
    settings: Horovod,
    flyte: Optional[FlyteRankContext] = None,
    elastic_timeout: int = 600,
    on_rank0_line: Optional[Callable[[str], None]] = None,
) -> Optional[RankResult]:
    """Run ``fn`` as an elastic Horovod job on this host: ``horovodrun`` with a host discovery script that lists
    ``workers`` local "hosts" of ``slots`` slots each (see ``local_host_names``), ``--min-np``/``--max-np`` from the
    worker bounds. Workers may fail and the job goes on while ``min_workers`` remain; returns the result of the rank
    that is rank 0 at the end; ``on_rank0_line`` as in ``run_local``."""
    hosts = local_host_names()
    if max_workers > len(hosts):
        from .settings import HorovodConfigError

        raise HorovodConfigError(f"a local elastic run stands for each worker host by a name of this host; there are "
                                 f"{len(hosts)} ({', '.join(hosts)}), max_workers={max_workers} needs more")
    job_dir, job_path, failures, extra = _job(fn, kwargs, settings, flyte)
    discovery = os.path.join(job_dir, "discover_hosts.sh")
    with open(discovery, "w") as f:
        f.write("#!/bin/sh\n" + "".join(f"echo {host}:{slots}\n" for host in hosts[:workers]))
    os.chmod(discovery, 0o755)
    args = [sys.executable, "-m", "horovod_flyte_runtime.horovodrun", "--network-interface", "lo",
            "-np", str(workers * slots), "--min-np", str(min_workers * slots), "--max-np", str(max_workers * slots),
            "--host-discovery-script", discovery, "--elastic-timeout", str(elastic_timeout),
            *settings.horovodrun_args(), *rank_command(job_path, job_dir)]
    env = {**os.environ, **extra}
    logger.info("launching an elastic Horovod job on this host: %d workers (%d..%d) x %d slots", workers,
                min_workers, max_workers, slots)
    _verbose(settings, "running %s", " ".join(args))
    output = RankOutput.for_launch(settings.verbose, on_rank0_line)
    processes = Processes(output)
    try:
        processes.start("horovodrun", args, env, prefix=None, die_with_parent=True)
        exited = LauncherExitWatch(job_dir, "horovodrun")  # the world's size: rank 0's, at the end
        # Horovod's elastic loop takes the stall check's shutdown for a reset and runs the stalled step again
        failed = processes.wait(give_up=lambda: failures.stalled() or exited())
        if gave_up_on(exited, failures):
            return read_results(job_dir, 1)[0]
        if failed is not None:
            raise RuntimeError(processes.describe_exit(*failed))
        return read_results(job_dir, 1)[0]
    except Exception as exc:
        processes.stop()
        raise failures.error(exc) from None
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C, or SIGTERM
        raise interrupted(processes) from None
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)
        output.close()


def _job(fn: Callable, kwargs: Optional[Dict[str, Any]], settings: Horovod, flyte: Optional[FlyteRankContext],
         all_ranks: bool = False) -> Tuple[str, str, RankFailures, Dict[str, str]]:
    """What both local launches set up: the settings for ``fn`` checked, a job folder with the pickled job and the
    ranks' failure records; returns (job folder, job file, failure records, the environment the ranks get on top: the
    settings', the quiet one, a new job secret, and loopback-only listeners)."""
    settings = settings.for_body(fn)
    settings.check_before_launch()
    job_dir = tempfile.mkdtemp(prefix="horovod-job-")
    failures = RankFailures(os.path.join(job_dir, "failures"))
    job_path = os.path.join(job_dir, "job.pkl")
    write_file(job_path, cloudpickle.dumps(RankJob.of(fn, kwargs, failures.folder, settings, flyte=flyte,
                                                      all_ranks=all_ranks, workdir=job_dir)))
    return job_dir, job_path, failures, with_job_secret({**settings.env(), **quiet_env(settings.verbose),
                                                         "PYTHONUNBUFFERED": "1", "PYTHONPATH": import_path(fn),
                                                         LOOPBACK_ENV: "1"})


def gave_up_on(exited: LauncherExitWatch, failures: RankFailures) -> bool:
    """Whether the launcher was stopped for not exiting after every rank returned (said in one warning line); the
    failure of a rank that failed is then raised (``failures``'s, or one naming the launcher)."""
    if not exited.gave_up:
        return False
    logger.warning("%s", exited.message())
    failed = exited.failed_ranks()
    if failed or failures.any():
        ranks = ", ".join(map(str, failed)) or "none"
        raise RuntimeError(f"{exited.message()}; ranks that exited non-zero: {ranks}")
    return True


def _own_network() -> Optional[Callable[[], None]]:
    """Where ``mpirun`` starts: a network namespace of its own (``own_network``; ``FLYTE_HOROVOD_MPIRUN_NETWORK=host``
    asks for none); where there can be none, one line says that other hosts can reach its listeners, and what to do."""
    enter, why = isolation()
    if why:
        logger.warning("mpirun's listeners can be reached from other hosts during this run: %s; to keep them off the "
                       "network, %s", why, HOW_TO_ALLOW)
    return enter


def interrupted(processes: Processes) -> InterruptedByUser:
    """Stop what a Ctrl-C interrupted; the error that says so."""
    processes.stop()
    exit_quickly()
    return InterruptedByUser(f"stopped {', '.join(processes.names) or 'the Horovod job before it started'}")


def record_mpirun_failure(output: str, failures: RankFailures, last_lines: Callable[[int], str]) -> None:
    """mpirun failed with ``output``: record the rank its closing message names, on this host, with that rank's
    ``last_lines(rank)`` (if it has no record: a rank that raised recorded why itself)."""
    named = mpirun_failed_rank(output)
    if named is not None:
        lines = last_lines(named.rank)
        text = f"{named.text}; its last output:\n{lines}" if lines else named.text
        failures.record(named.rank, DIED, text, replace=False)


def _verbose(settings: Horovod, message: str, *args: Any) -> None:
    """With ``Horovod(verbose=True)``, say what is started, on standard error (whatever the logging set-up)."""
    if settings.verbose:
        print(f"[horovod launcher] {message % args}", file=sys.stderr, flush=True)
