"""The MPI operator's launcher as ``MPIJob`` and ``HorovodJob`` tasks register it:
``python -m horovod_flyte_runtime.cluster_launcher --slots S -- <mpirun or horovodrun ...> ... pyflyte-execute ...``
(``pyflyte-map-execute`` for an element of a ``map_task``: propeller runs each element as an MPIJob of its own), and
as Flyte 2 ``MPIJob`` tasks register it, with each rank running ``a0`` (``launcher_entrypoints``).

It makes two promises true that a real cluster does not keep for a bare ``mpirun``/``horovodrun``:

- **Slots.** flytepropeller's ``mpi`` plugin reads ``slots`` only for task type version 0; kfmpi and this plugin
  register version 1, so every MPIJob gets ``slotsPerWorker: 1`` (flyteorg/flyte v1.16.8, 51877f89,
  ``flyteplugins/go/tasks/plugins/k8s/kfoperators/mpi/mpi.go``) and the training-operator writes ``slots=1`` for
  each worker into the hostfile and ``discover_hosts.sh`` (kubeflow/training-operator v1.8.1, 0f8735fa,
  ``pkg/controller.v1/mpi/mpijob_controller.go``: ``newConfigMap``, ``updateDiscoverHostsInConfigMap``). Both are
  read-only ConfigMap files, so the launcher writes a copy of the hostfile in which every host has at least ``S``
  slots (never fewer than it had), points ``OMPI_MCA_orte_default_hostfile`` and every argument naming the
  operator's hostfile at the copy, and puts a wrapper in front of a ``--host-discovery-script`` that raises the hosts
  it prints the same way, each time Horovod runs it.
- **The task's error.** When the launcher command exits non-zero (a rank killed, a host lost), the launcher pod
  fails, the MPIJob fails and propeller shows only "Job failed": it reads ``error.pb`` only from a job that succeeded
  (``kfoperators/common/common_operator.go`` ``GetPhaseInfo``; ``flytepropeller/pkg/controller/nodes/task/k8s/
  plugin_manager.go``). So the launcher writes the task's ``error.pb`` itself (the rank the launcher names, with its
  host, and what the ranks recorded; see ``failures``) and exits 0, as ``pyflyte-execute`` does with an error it
  caught (1 where ``FLYTE_FAIL_ON_ERROR`` is true, as there). A launcher that succeeded is left alone: a rank that
  raised has written its error already. The Flyte 2 backend does the same (flyteorg/flyte 6fadb90, the same
  ``mpi.go`` and ``common_operator.go``; ``executor/pkg/plugin/k8s/plugin_manager.go``), and ``a0`` exits 0 too.

It also gives the job a secret (``job_secret``, in the environment: ``mpirun -x`` names it, and
``horovodrun`` is run as ``horovod_flyte_runtime.horovodrun``, which hands it and the rest of the ranks'
environment to remote ranks through ssh's standard input), so that the elastic rendezvous and the ranks' liveness
port hear only the job's own processes.
"""

import argparse
import logging
import os
import shlex
import shutil
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Sequence

from .launcher_entrypoints import ENTRYPOINTS, entrypoint, option, outputs_prefix, raw_output_prefix

logger = logging.getLogger("flytekitplugins.horovod")

# What a discovery script wrapper runs on the operator's script's output: ``host:N`` -> ``host:max(N, S)``; awk, not
# Python, because Horovod runs the script every second for the whole job.
_RAISE_DISCOVERED = ("awk -F: -v s={slots} "
                     "'NF == 2 {{ n = $2 + 0; if (n < s) n = s; print $1 \":\" n; next }} {{ print }}'")


def raise_hostfile_slots(text: str, slots: int) -> str:
    """An Open MPI hostfile (``host slots=N`` per line) with every host given at least ``slots`` slots."""
    lines = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            lines.append(line)
            continue
        given = [int(w.split("=", 1)[1]) for w in words[1:] if w.startswith("slots=")]
        rest = [w for w in words[1:] if not w.startswith("slots=")]
        lines.append(" ".join([words[0], f"slots={max(given + [slots])}", *rest]))
    return "".join(f"{line}\n" for line in lines)


def discovery_wrapper(script: str, slots: int) -> str:
    """A ``sh`` script that runs the discovery ``script`` and prints its hosts with at least ``slots`` slots each."""
    return (f"#!/bin/sh\nhosts=$({shlex.quote(script)}) || exit $?\n"
            f"printf '%s\\n' \"$hosts\" | {_RAISE_DISCOVERED.format(slots=slots)}\n")


def with_slots(command: Sequence[str], env: Dict[str, str], slots: int, workdir: str) -> List[str]:
    """``command`` with the operator's hostfile and discovery script replaced by copies giving ``slots`` slots per
    host (written into ``workdir``); ``env``'s ``OMPI_MCA_orte_default_hostfile`` is pointed at the copy."""
    command = list(command)
    hostfile = env.get("OMPI_MCA_orte_default_hostfile")
    if hostfile:
        copy = os.path.join(workdir, "hostfile")
        with open(hostfile) as f:
            text = raise_hostfile_slots(f.read(), slots)
        with open(copy, "w") as f:
            f.write(text)
        env["OMPI_MCA_orte_default_hostfile"] = copy
        command = [copy if word == hostfile else word for word in command]
    if "--host-discovery-script" in command:
        at = command.index("--host-discovery-script") + 1
        wrapper = os.path.join(workdir, "discover_hosts.sh")
        with open(wrapper, "w") as f:
            f.write(discovery_wrapper(command[at], slots))
        os.chmod(wrapper, 0o755)
        command[at] = wrapper
    return command


def rank_host(command: Sequence[str], env: Dict[str, str], rank: int) -> Optional[str]:
    """The host a fixed-size launch put ``rank`` on: Horovod's own assignment over the hostfile, which is also where
    ``mpirun -map-by slot`` puts it (each host's slots in turn, in hostfile order); None for an elastic launch."""
    from horovod.runner.common.util import hosts

    hostfile, np_ = env.get("OMPI_MCA_orte_default_hostfile"), option(command, "-np", command[0])
    if not hostfile or np_ is None or "--host-discovery-script" in command:
        return None
    plan = hosts.get_host_assignments(hosts.parse_hosts(hosts.parse_host_files(hostfile)), int(np_))
    return next((slot.hostname for slot in plan if slot.rank == rank), None)


def launcher_failure(command: Sequence[str], env: Dict[str, str], output: str, code: int) -> BaseException:
    """The task's error for a launcher that exited with ``code``: the rank it names (recorded with its host among
    what the ranks recorded in the job's failure folder), else what the ranks recorded, else the launcher's output."""
    from .classify import DIED, describe_status, launcher_failed_rank
    from .failures import job_failures

    failures = job_failures(raw_output_prefix(command))
    named = launcher_failed_rank(output)
    if named is not None:
        host = rank_host(command, env, named.rank)
        failures.record(named.rank, DIED, named.text, replace=False, **({"host": host} if host else {}))
    tail = output.rstrip()[-3000:]
    return failures.error(RuntimeError(f"{os.path.basename(command[0])} {describe_status(code)}; its last output:\n"
                                       f"{tail}"))


def write_task_error(command: Sequence[str], error: BaseException) -> None:
    """Write ``error`` as the task's error document under the output prefix of the entrypoint in ``command``."""
    ENTRYPOINTS[entrypoint(command)].write_error(outputs_prefix(command), raw_output_prefix(command), error)


def with_job_secret_passed(command: Sequence[str], env: Dict[str, str]) -> List[str]:
    """``command`` passing the job secret, which goes into ``env``: ``mpirun`` forwards it by name (``-x``),
    ``horovodrun`` is this plugin's (see ``horovodrun``)."""
    from .job_secret import SECRET_ENV, with_job_secret

    env.update(with_job_secret(env))
    name = os.path.basename(command[0])
    if name == "mpirun":
        return [command[0], "-x", SECRET_ENV, *command[1:]]
    if name == "horovodrun":
        return [sys.executable, "-m", f"{__package__}.horovodrun", *command[1:]]
    return list(command)


def _stalled(command: Sequence[str]) -> Callable[[], bool]:
    """For an elastic launch: whether rank 0 recorded that Horovod's stall check stopped the ranks. Horovod's elastic
    loop takes that shutdown for a reset and runs the stalled step again, until the pod's deadline; the launcher gives
    up instead (asked once a second) and writes the stall as the task's error. A fixed-size launch ends by itself:
    rank 0 exits non-zero after recording the stall."""
    if "--host-discovery-script" not in command:
        return lambda: False
    from .failures import job_failures

    return job_failures(raw_output_prefix(command)).stalled


def run(command: Sequence[str], slots: int) -> int:
    """Run the launcher ``command`` with ``slots`` per worker; own the task's error when it fails. Returns 0, or 1
    after writing ``error.pb`` where ``FLYTE_FAIL_ON_ERROR`` is true (an error writing it is raised: the pod then
    fails, as it would without this launcher). Run by ``main``, SIGTERM (the kubelet stopping the pod) stops the command
    and whatever it started (SIGTERM, SIGKILL 5 s later), then ends this process with 143: ``horovodrun``'s own shutdown can wait
    for ever on a rank that is gone. The command also gets SIGTERM if this process dies otherwise."""
    from .processes import Processes

    exit_after_error = ENTRYPOINTS[entrypoint(command)].exit_after_error
    workdir = tempfile.mkdtemp(prefix="horovod-launcher-")
    env = dict(os.environ)
    processes = Processes()
    try:
        command = with_slots(command, env, slots, workdir)
        processes.start(os.path.basename(command[0]), with_job_secret_passed(command, env), env, prefix=None,
                        die_with_parent=True)
        stalled, exited = _stalled(command), _exit_watch(command)
        failed = processes.wait(give_up=lambda: stalled() or exited())
        if exited.gave_up:  # the ranks' pyflyte-execute wrote the task's outputs or error already
            logger.warning("%s", exited.message())
            failed = None if _written(command, "outputs.pb") else failed
        if failed is None:
            return 0
        if exited.gave_up:
            return exit_after_error()
        error = launcher_failure(command, env, processes.finished_output(0), failed[1])
        logger.error("the launcher failed; the task's error: %s", error)
        write_task_error(command, error)
        return exit_after_error()
    except (KeyboardInterrupt, SystemExit):  # SIGTERM (stopped_by_sigterm) or Ctrl-C
        processes.stop()
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        _remove_marks(command)


def _exit_watch(command: Sequence[str]):
    """The watch of a launcher that does not exit once every rank has returned (see ``launcher_exit``): its
    ranks mark it in the job's failure folder; rank 0's pyflyte-execute has also written the outputs or an error."""
    from .failures import job_failures
    from .launcher_exit import LauncherExitWatch

    size = option(command, "-np", command[0])
    if raw_output_prefix(command) is None:
        return LauncherExitWatch("/nonexistent-horovod-markers", os.path.basename(command[0]), also=lambda: False)
    return LauncherExitWatch(job_failures(raw_output_prefix(command)).folder, os.path.basename(command[0]),
                             None if size is None or "--host-discovery-script" in command else int(size),
                             also=lambda: _written(command, "outputs.pb") or _written(command, "error.pb"))


def _written(command: Sequence[str], name: str) -> bool:
    """Whether a file ``name`` is under the task's output prefix (a map task's element writes below it)."""
    import fsspec

    fs, _, (root,) = fsspec.get_fs_token_paths(outputs_prefix(command).rstrip("/"))
    fs.invalidate_cache()
    return fs.exists(root) and any(path.rsplit("/", 1)[-1] == name for path in fs.find(root))


def _remove_marks(command: Sequence[str]) -> None:
    """The ranks' markers that they returned (and their folder, where nothing else is in it) removed."""
    from .failures import job_failures
    from .launcher_exit import remove_marks

    if raw_output_prefix(command) is not None:
        remove_marks(job_failures(raw_output_prefix(command)).folder)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, required=True, help="ranks per worker pod (the task's slots)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the launcher command")
    from .settings import whole_number

    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not whole_number(args.slots, at_least=1) or not command:
        parser.error(f"--slots={args.slots} must be at least 1, followed by -- and the launcher command")
    logging.basicConfig(level=logging.INFO, format="[horovod launcher] %(message)s")
    from .processes import stopped_by_sigterm

    sys.exit(stopped_by_sigterm(run)(command, args.slots))


if __name__ == "__main__":
    main()
