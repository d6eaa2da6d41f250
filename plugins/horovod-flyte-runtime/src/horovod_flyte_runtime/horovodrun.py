"""``horovodrun`` with the job's secret: ``python -m horovod_flyte_runtime.horovodrun ARGS`` is Horovod's
``horovodrun ARGS`` (the local elastic launcher runs it, and ``cluster_launcher`` runs it for a cluster's
``horovodrun``), changed in four ways:

- its elastic rendezvous takes worker addresses only when signed with the job's secret and never serves them
  (``elastic_rendezvous``); the secret is made here unless the environment brings one;
- the ranks' environment is not on their command lines: Horovod starts each rank as ``sh -c "env K=V ... command"``
  with every exportable variable (readable by any user in ``/proc/<pid>/cmdline``); here the command names only
  Horovod's own slot and rendezvous variables, and the rank's shell reads the rest from a 0600 file (a remote rank's,
  from ssh's standard input);
- its rendezvous serves only requests signed with the job's secret (``job_secret.signed_rendezvous_server``): the
  Gloo keys and ``rank_and_size`` that each rank's C++ store signs, and the elastic workers' addresses;
- in a local run (``loopback``) Horovod's servers bind 127.0.0.1.
"""

import contextlib
import os
import re
import shlex
import shutil
import tempfile
from typing import Callable, Dict, Iterator

from .elastic_rendezvous import authenticated_handler
from .job_secret import job_secret, signed_rendezvous_server, with_job_secret
from .loopback import bind_horovod_to_loopback

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # what a shell can export


@contextlib.contextmanager
def env_file(env: Dict[str, str]) -> Iterator[str]:
    """A 0600 file (in a 0700 folder, removed after) of ``export K='V'`` lines for ``env``'s exportable names."""
    from horovod.runner.common.util.env import is_exportable

    folder = tempfile.mkdtemp(prefix="horovodrun-env-")
    path = os.path.join(folder, "env.sh")
    try:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.writelines(f"export {k}={shlex.quote(str(v))}\n" for k, v in env.items()
                         if _NAME.match(k) and is_exportable(k))
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def rank_commands(path: str, run_command: str) -> Callable:
    """What Horovod's ``_slot_info_to_command_fn`` returns (a slot's rank command), the command sourcing the ranks'
    environment from ``path`` (a local rank) or from standard input (a remote rank: see ``remote_command_reading``)
    instead of naming it."""
    from horovod.runner.gloo_run import create_slot_env_vars
    from horovod.runner.util import network

    def slot_info_to_command(slot_info) -> str:
        local = network.resolve_host_address(slot_info.hostname) in network.get_local_host_addresses()
        slot_env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in create_slot_env_vars(slot_info).items())
        source = f"cat {shlex.quote(path)}" if local else "cat"
        # Horovod stops a job's ranks by SIGTERM to its shells' children, then SIGSTOPs each shell and kills it 5 s
        # later (safe_shell_exec.terminate_executor_shell_and_children): a local rank stays its shell's child, so it
        # gets the SIGTERM and its shell ends with it. A remote rank replaces its shell, so that it is sshd's child and
        # its parent-death signal (elastic ranks) follows the ssh session.
        run = "" if local else "exec "
        return f'eval "$({source})" && {run}env {slot_env} {run_command}'

    return slot_info_to_command


def remote_command_reading(path: str, get_remote_command: Callable[..., str]) -> Callable[..., str]:
    """Horovod's ``get_remote_command`` (``ssh ... host command``), with ``path`` as ssh's standard input."""
    def remote_command(*args, **kwargs) -> str:
        return f"{get_remote_command(*args, **kwargs)} < {shlex.quote(path)}"

    return remote_command


def main() -> None:
    from horovod.runner import gloo_run, launch

    os.environ.update(with_job_secret(os.environ))
    bind_horovod_to_loopback()
    gloo_run.create_rendezvous_handler = authenticated_handler(gloo_run.create_rendezvous_handler)
    gloo_run.RendezvousServer = signed_rendezvous_server(job_secret())
    remote = gloo_run.get_remote_command
    with contextlib.ExitStack() as files:
        def slot_info_to_command_fn(run_command: str, env: Dict[str, str]) -> Callable:
            path = files.enter_context(env_file({**env, "PYTHONUNBUFFERED": "1"}))
            gloo_run.get_remote_command = remote_command_reading(path, remote)
            return rank_commands(path, run_command)

        gloo_run._slot_info_to_command_fn = slot_info_to_command_fn
        launch.run_commandline()


if __name__ == "__main__":
    main()
