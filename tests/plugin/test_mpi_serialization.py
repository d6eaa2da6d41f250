"""The MPI route serializes like kfmpi (task type, custom) and its command is the launcher's."""

import pytest
from flytekit import Resources, task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.core.python_auto_container import PythonAutoContainerTask
from flytekitplugins import kfmpi
from flytekitplugins.kfmpi.task import MPIFunctionTask

from flytekitplugins.horovod import (
    CleanPodPolicy,
    Horovod,
    HorovodMPIFunctionTask,
    Launcher,
    MPIJob,
    RestartPolicy,
    RunPolicy,
    Worker,
)
from horovod_flyte_runtime.cluster_command import MPIRUN_BASE

SETTINGS = SerializationSettings(image_config=ImageConfig.auto_default_image(), project="p", domain="d", version="v")
LAUNCHER = ["python", "-m", "horovod_flyte_runtime.cluster_launcher", "--slots"]  # then the slots and --


def _launcher_command(t, slots: int):
    """The command the launcher pod's ``cluster_launcher --slots <slots> --`` runs."""
    cmd = t.get_command(SETTINGS)
    assert cmd[:6] == LAUNCHER + [str(slots), "--"]
    return cmd[6:]


def _fields():
    return dict(
        launcher=Launcher(replicas=1, requests=Resources(cpu="1")),
        worker=Worker(replicas=3, limits=Resources(cpu="2", mem="4Gi"), restart_policy=RestartPolicy.FAILURE),
        run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.ALL, backoff_limit=2),
        slots=2,
    )


def _body(x: int) -> int:
    return x


def test_custom_equals_kfmpi_for_the_same_fields():
    ours = task(task_config=MPIJob(**_fields(), horovod=Horovod(fusion_threshold_mb=16)))(_body)
    theirs = task(task_config=kfmpi.MPIJob(**_fields()))(_body)
    assert isinstance(ours, HorovodMPIFunctionTask) and type(theirs) is MPIFunctionTask
    assert ours.task_type == theirs.task_type == "mpi"
    assert ours.task_type_version == theirs.task_type_version == 1
    assert ours.get_custom(SETTINGS) == theirs.get_custom(SETTINGS)
    assert ours.get_custom(SETTINGS)["workerReplicas"]["replicas"] == 3


def test_mpi_controller_command_is_mpirun_with_ranks_and_settings():
    t = task(task_config=MPIJob(worker=Worker(replicas=3), slots=2,
                                horovod=Horovod(controller="mpi", fusion_threshold_mb=16, cycle_time_ms=5)))(_body)
    cmd = _launcher_command(t, slots=2)
    assert cmd[:2] == ["mpirun", "--allow-run-as-root"]
    assert cmd[cmd.index("-np") + 1] == "6"
    exported = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "-x"]
    assert f"HOROVOD_FUSION_THRESHOLD={16 * 1024 * 1024}" in exported
    assert "HOROVOD_CYCLE_TIME=5" in exported
    # kfmpi's own mpirun base command, as the runtime (shared with the Flyte 2 plugin) writes it down
    assert cmd[:len(MPIRUN_BASE)] == MPIRUN_BASE == MPIFunctionTask._MPI_BASE_COMMAND
    execute = cmd.index("pyflyte-execute")
    assert cmd[execute - 2] == "python" and cmd[execute - 1] == SETTINGS.entrypoint_settings.path
    assert cmd[execute:] == PythonAutoContainerTask.get_command(t, SETTINGS)


def test_gloo_controller_command_is_horovodrun_on_the_operator_hostfile():
    t = task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(timeline_filename="/tmp/t.json")))(_body)
    cmd = _launcher_command(t, slots=1)
    assert cmd[:3] == ["horovodrun", "-np", "2"]
    assert cmd[cmd.index("--hostfile") + 1] == "$(OMPI_MCA_orte_default_hostfile)"
    assert "--gloo" in cmd and cmd[cmd.index("--timeline-filename") + 1] == "/tmp/t.json"
    assert "pyflyte-execute" in cmd


def test_launcher_replicas_default_to_one_and_workers_are_required():
    assert MPIJob(worker=Worker(replicas=2)).launcher.replicas == 1
    with pytest.raises(ValueError, match="worker=Worker"):
        task(task_config=MPIJob())(_body)
    with pytest.raises(ValueError, match=r"slots=0: must be a whole number, at least 1"):
        MPIJob(worker=Worker(replicas=2), slots=0)
    with pytest.raises(ValueError, match=r"worker.replicas=2.5: must be a whole number, at least 1"):
        MPIJob(worker=Worker(replicas=2.5))
