"""The launcher's slot copies: the operator's hostfile and ``discover_hosts.sh`` (as the training-operator writes them
for the ``slotsPerWorker: 1`` propeller sets) become ones with the task's slots, read by real ``sh`` and by Horovod's
own hostfile parser. The launcher is run for real in ``test_mpi_launcher.py`` and ``tests/multihost``."""

import subprocess

from horovod_flyte_runtime.cluster_launcher import discovery_wrapper, raise_hostfile_slots, rank_host, with_slots
from tests.cluster.backend import operator_discovery_script, operator_hostfile


def test_the_hostfile_copy_gives_every_host_at_least_the_task_s_slots():
    assert raise_hostfile_slots(operator_hostfile(["job-worker-0", "job-worker-1"], 1), 2) == \
        "job-worker-0 slots=2\njob-worker-1 slots=2\n"
    # never fewer than the hostfile gave; lines without slots get them; comments and blank lines are kept
    assert raise_hostfile_slots("a slots=4 max_slots=8\n\n# gpu\nb\n", 2) == \
        "a slots=4 max_slots=8\n\n# gpu\nb slots=2\n"


def _script(path, text: str):
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def test_the_discovery_wrapper_prints_the_operator_s_hosts_with_the_task_s_slots(tmp_path):
    operator = _script(tmp_path / "discover_hosts.sh", operator_discovery_script(["job-worker-0", "job-worker-1"], 1))
    wrapper = _script(tmp_path / "wrapper.sh", discovery_wrapper(operator, 3))
    ran = subprocess.run([wrapper], stdout=subprocess.PIPE, text=True, check=True)
    assert ran.stdout == "job-worker-0:3\njob-worker-1:3\n"
    failing = _script(tmp_path / "failing.sh", "#!/bin/sh\necho job-worker-0:1\nexit 3\n")
    assert subprocess.run([_script(tmp_path / "w2.sh", discovery_wrapper(failing, 3))]).returncode == 3


def test_the_command_and_environment_name_the_copies_and_ranks_map_to_their_hosts(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(operator_hostfile(["b", "c"], 1))
    env = {"OMPI_MCA_orte_default_hostfile": str(hostfile)}
    workdir = tmp_path / "work"
    workdir.mkdir()
    command = with_slots(["horovodrun", "-np", "4", "--hostfile", str(hostfile), "pyflyte-execute"], env, 2,
                         str(workdir))
    copy = str(workdir / "hostfile")
    assert command == ["horovodrun", "-np", "4", "--hostfile", copy, "pyflyte-execute"]
    assert env["OMPI_MCA_orte_default_hostfile"] == copy and hostfile.read_text() == "b slots=1\nc slots=1\n"
    assert [rank_host(command, env, rank) for rank in range(4)] == ["b", "b", "c", "c"]
    elastic = with_slots(["horovodrun", "--host-discovery-script", "/etc/mpi/discover_hosts.sh", "pyflyte-execute"],
                         {}, 2, str(workdir))
    assert elastic[2] == str(workdir / "discover_hosts.sh") and rank_host(elastic, {}, 0) is None
