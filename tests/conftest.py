"""Fixtures of every test: run real commands (pyflyte, mpirun) the way a user or a cluster would, with the helpers
of tests.support."""

import os
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

# also importable from here, where the other test packages import them from
from tests.support import ROOT, VENV_BIN, Ran, run_command  # noqa: F401
from tests.support import leftovers as _leftovers
from tests.support.cpu_accounting import CpuAccounting
from tests.support.shared_heavy import SharedHeavyTests


def hostname_resolves_to_loopback() -> bool:
    import socket

    try:
        return socket.gethostbyname(socket.gethostname()).startswith("127.")
    except OSError:
        return False


def on_loopback_hostname(args: List[str], tmp_path: Path) -> List[str]:
    """``args`` run where the host name resolves to a loopback address (Debian's default /etc/hosts line
    ``127.0.1.1 <hostname>``): as is where it already does, else in a private mount namespace whose /etc/hosts says so."""
    import socket

    if hostname_resolves_to_loopback():
        return args
    if os.geteuid() != 0:
        pytest.skip("needs root (unshare --mount) to give this machine's host name a loopback address")
    hosts = tmp_path / "hosts"
    hosts.write_text(Path("/etc/hosts").read_text() + f"\n127.0.1.1 {socket.gethostname()}\n")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts), *args]


def pytest_configure(config):
    """Each test's CPU, its processes' included, measured and the heaviest printed at the end (cpu_accounting); in
    make test's two runs, the heavy tests shared between them (shared_heavy)."""
    accounting = CpuAccounting.where_possible(config.rootpath)
    if accounting:
        config.pluginmanager.register(accounting, "cpu_accounting")
    shared = SharedHeavyTests.from_environment()
    if shared:
        config.pluginmanager.register(shared, "shared_heavy")


def pytest_collection_modifyitems(items):
    """``@pytest.mark.needs_framework("mxnet")``: skipped, saying so, where this Horovod build lacks the framework (the
    default set-up builds TensorFlow and PyTorch; make matrix's legs build others). A ``multihost`` test is also
    ``serial``: its hosts' traffic and timings are what it asserts, so ``make test`` runs it alone."""
    from horovod_flyte_runtime.build_info import built_frameworks

    built = built_frameworks()
    for item in items:
        if item.get_closest_marker("multihost") and not item.get_closest_marker("serial"):
            item.add_marker(pytest.mark.serial)
        for marker in item.iter_markers("needs_framework"):
            missing = [name for name in marker.args if name not in built]
            if missing:
                item.add_marker(pytest.mark.skip(reason=f"this Horovod build has no {', '.join(missing)} "
                                                        f"(it serves {', '.join(built) or 'none'})"))


@pytest.fixture
def pyflyte_run():
    """``pyflyte run <file> <workflow> [args]`` as a user types it; asserts no process of it is left behind."""
    runs = []

    def run(path: str, workflow: str, *args: str, env: Optional[Dict[str, str]] = None, timeout: float = 600,
            wrap=lambda command: command) -> Ran:
        ran = run_command(wrap([str(VENV_BIN / "pyflyte"), "run", path, workflow, *args]), env=env, timeout=timeout)
        runs.append(ran)
        return ran

    yield run
    for ran in runs:
        time.sleep(0.5)
        assert _leftovers(ran.marker) == [], f"processes left running after the run: {_leftovers(ran.marker)}"


@pytest.fixture
def leftovers():
    return _leftovers
