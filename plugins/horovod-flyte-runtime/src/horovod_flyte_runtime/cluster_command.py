"""The command the MPI operator's launcher pod runs for a Horovod task, whichever Flyte SDK serialized it: the
plugin's ``cluster_launcher`` (the task's slots restored, the task's error owned) around ``mpirun`` or ``horovodrun``,
around the per-rank entrypoint the SDK gives (flytekit's ``pyflyte-execute``, Flyte 2's ``a0``).

No flytekit import: the Flyte 2 plugin builds its tasks' commands here too.
"""

from typing import Any, List

from .settings import Horovod, HorovodConfigError

# The launcher's hostfile: the training-operator mounts it and sets this variable on the launcher pod; Kubernetes
# expands $(VAR) in container commands, so horovodrun reads the same hostfile mpirun reads by default (both get
# cluster_launcher's copy with the task's slots).
HOSTFILE_REF = "$(OMPI_MCA_orte_default_hostfile)"

# flytekitplugins-kfmpi's ``MPIFunctionTask._MPI_BASE_COMMAND`` (1.16.31), what kfmpi users' launchers run
# (tests/plugin/test_mpi_serialization.py checks it is still kfmpi's)
MPIRUN_BASE = ["mpirun", "--allow-run-as-root", "-bind-to", "none", "-map-by", "slot", "-x", "LD_LIBRARY_PATH",
               "-x", "PATH", "-x", "NCCL_DEBUG=INFO", "-mca", "pml", "ob1", "-mca", "btl", "^openib"]

CLUSTER_LAUNCHER = "horovod_flyte_runtime.cluster_launcher"


def launcher_command(num_ranks: int, settings: Horovod) -> List[str]:
    """The command prefix the MPI operator's launcher runs to start ``num_ranks`` ranks."""
    if settings.controller == "mpi":
        return MPIRUN_BASE + ["--tag-output"] + settings.mpirun_args() + ["-np", str(num_ranks)]
    return ["horovodrun", "-np", str(num_ranks), "--hostfile", HOSTFILE_REF] + settings.horovodrun_args()


def cluster_command(config: Any, command: List[str]) -> List[str]:
    """``command`` run by ``cluster_launcher`` with the task's slots (``config``: an ``MPIJob`` of either SDK);
    refused where the launcher would not run it."""
    if config.launcher.command and config.slots > 1:
        raise HorovodConfigError(
            f"slots={config.slots} with launcher=Launcher(command=...): the Flyte backend's mpi plugin (flyteorg/flyte "
            "mpi.go, v1.16.8 and the Flyte 2 backend alike) runs that command instead of the task's and never passes "
            "slots to the MPIJob for task type version 1, so each worker has 1 slot in the operator's hostfile; leave "
            "Launcher.command unset (the task's launcher raises the hostfile to the task's slots) or use slots=1")
    return ["python", "-m", CLUSTER_LAUNCHER, "--slots", str(config.slots), "--"] + command
