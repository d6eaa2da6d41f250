"""SSH between the hosts, as the MPI operator sets it up: a key pair the launcher uses, sshd in each worker host.

Every host gets a host key, the launcher's public key in ``authorized_keys`` and a client config (identity, the
hosts' known keys) in its own ``/etc/ssh``. ``start_sshd`` starts a worker host's sshd with the worker pod's
environment (``SetEnv``), so a command run over ssh sees what a command ``kubectl exec``-ed into the pod sees.
``rsh_agent`` writes the launcher's remote agent: what ``OMPI_MCA_plm_rsh_agent`` names
(the operator's ``/etc/mpi/kubexec.sh <pod> <command>``), here ``ssh <host> <command>``.
"""

import subprocess
import time
from pathlib import Path
from typing import Dict

from tests.multihost.network import Host, Network

AGENT = """#!/bin/sh
# The launcher's remote agent (OMPI_MCA_plm_rsh_agent): <host> <command...>, like the MPI operator's kubexec.sh.
host=$1
shift
exec ssh "$host" "$*"
"""

SSHD_CONFIG = """Port 22
HostKey /etc/ssh/ssh_host_ed25519_key
AuthorizedKeysFile /etc/ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PrintMotd no
PidFile none
MaxStartups 100
MaxSessions 100
"""


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)


def configure(network: Network) -> Path:
    """Keys and client config on every host; returns the launcher's private key."""
    client_key = network.workdir / "launcher_key"
    keygen(client_key)
    known = []
    for host in network.hosts.values():
        keygen(host.etc / "ssh" / "ssh_host_ed25519_key")
        public = (host.etc / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()[:2]
        known.append(f"{host.name},{host.address} {' '.join(public)}\n")
    for host in network.hosts.values():
        ssh = host.etc / "ssh"
        (ssh / "authorized_keys").write_text((client_key.with_suffix(".pub")).read_text())
        (ssh / "ssh_known_hosts").write_text("".join(known))
        (ssh / "ssh_config").write_text(
            "Host *\n"
            f"    IdentityFile {client_key}\n"
            "    UserKnownHostsFile /etc/ssh/ssh_known_hosts\n"
            "    GlobalKnownHostsFile /etc/ssh/ssh_known_hosts\n"
            "    BatchMode yes\n"
            "    ConnectTimeout 10\n"
            "    LogLevel ERROR\n"
        )
    return client_key


def rsh_agent(path: Path) -> Path:
    path.write_text(AGENT)
    path.chmod(0o755)
    return path


def _set_env(env: Dict[str, str]) -> str:
    for name, value in env.items():
        if any(c in value for c in '"\n') or not name.replace("_", "").isalnum():
            raise ValueError(f"cannot pass {name}={value!r} through sshd's SetEnv")
    return "SetEnv " + " ".join(f'"{k}={v}"' for k, v in sorted(env.items())) + "\n"


def start_sshd(host: Host, env: Dict[str, str], log: Path, timeout: float = 10.0) -> subprocess.Popen:
    """sshd in ``host`` whose sessions get ``env`` (the worker pod's environment); returns once it listens."""
    config = host.etc / "ssh" / "sshd_config"
    config.write_text(SSHD_CONFIG + (_set_env(env) if env else ""))
    proc = host.start_daemon("sshd", ["/usr/sbin/sshd", "-D", "-e", "-f", "/etc/ssh/sshd_config"],
                             env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, log=log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listening = subprocess.run(["ss", "-N", host.netns, "-tlnH", "sport", "=", ":22"], stdout=subprocess.PIPE,
                                   text=True).stdout
        if listening.strip():
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"sshd did not start in {host.name}: {log.read_text()[-2000:]}")

