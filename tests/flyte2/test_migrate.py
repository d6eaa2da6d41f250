"""v1 files on Flyte 2 through ``pyflyte-migrate`` (flyte-migrate), unchanged: with flyteplugins-horovod installed, a
``flytekitplugins.horovod`` ``MPIJob`` task runs with 2 real ranks under ``mpirun`` (a kfmpi one under Gloo is
docs/flyte2.md's example, run by tests/docs), a ``HorovodSpark`` task's Run API on 2 ranks in its Spark session, the
README's ``workflows/rossmann.py wf_mpi`` end to end, and every field of kfmpi's and this project's ``MPIJob``,
``HorovodJob`` and ``HorovodSpark`` reaches the Flyte 2 config of the same name.

flyte-migrate patches flytekit when imported, so everything here runs in processes of its own."""

import importlib.util
import json
import re

import pytest

from tests.support import VENV_BIN, leftovers, run_command

# found, not imported: importing flyte_migrate would patch flytekit for every test after this one
pytestmark = [pytest.mark.needs_framework("pytorch"),
              pytest.mark.skipif(importlib.util.find_spec("flyte_migrate") is None,
                                 reason="flyte-migrate (flyteplugins-horovod's migrate extra) is not installed")]

FLOWS = "tests/flyte2/flows/v1_tasks.py"


@pytest.mark.parametrize("task", ["horovod_mpirun_allreduce", "horovod_spark_allreduce"])
def test_pyflyte_migrate_runs_a_v1_horovod_task_with_two_real_ranks(task):
    ran = run_command([str(VENV_BIN / "pyflyte-migrate"), "run", FLOWS, task, "--x", "1.0"], timeout=300)
    assert ran.returncode == 0, ran.output[-3000:]
    assert "rank 0 of 2: 3.0" in ran.output, ran.output[-3000:]  # both ranks' values in rank 0's sum
    assert leftovers(ran.marker) == []


@pytest.mark.slow
@pytest.mark.heavy  # 80 s of data, Spark and training: shared by make test's two runs
def test_pyflyte_migrate_runs_the_rossmann_mpi_workflow_and_it_scores_as_on_flyte_1():
    """``workflows/rossmann.py`` unchanged: its Spark ``prepare`` through flyteplugins-spark, ``train_mpi`` on 2 ranks,
    and the file's ``HorovodSpark`` task (``train``) made a Flyte 2 one when the module loads."""
    ran = run_command([str(VENV_BIN / "pyflyte-migrate"), "run", "workflows/rossmann.py", "wf_mpi"], timeout=600)
    assert ran.returncode == 0, ran.output[-3000:]
    scored = re.search(r"^submission.csv: test RMSPE ([\d.]+), perfect model ([\d.]+)", ran.output, re.M)
    assert scored, ran.output[-3000:]
    assert float(scored.group(1)) <= 1.10 * float(scored.group(2)), scored.group(0)  # as wf_mpi on Flyte 1
    assert "Horovod world of 2 ranks" in ran.output, ran.output[-3000:]
    assert leftovers(ran.marker) == []


CONFIGS = """
import dataclasses, json
import flyte_migrate  # as pyflyte-migrate does: before flytekit
from flyte_migrate._plugins import _transform_plugin_config_v1_to_v2 as to_v2
from flytekit import Resources
from flytekitplugins import kfmpi
from flytekitplugins.kfmpi.task import CleanPodPolicy, RestartPolicy
from flytekitplugins.horovod import Horovod, HorovodJob, HorovodSpark, MPIJob, Worker

def seen(v1):
    v2 = to_v2(v1)
    return {"type": f"{type(v2).__module__}.{type(v2).__name__}", **{k: repr(v) for k, v in vars(v2).items()}}

print(json.dumps({
    "kfmpi": seen(kfmpi.MPIJob(
        worker=kfmpi.Worker(replicas=3, image="img:1", requests=Resources(cpu="2", mem="4Gi"),
                            restart_policy=RestartPolicy.FAILURE),
        launcher=kfmpi.Launcher(command=["bash"], limits=Resources(cpu="1")),
        run_policy=kfmpi.RunPolicy(clean_pod_policy=CleanPodPolicy.ALL, backoff_limit=2), slots=2)),
    "kfmpi_counts": seen(kfmpi.MPIJob(num_workers=4, num_launcher_replicas=1)),
    "kfmpi_elastic": seen(kfmpi.HorovodJob(worker=kfmpi.Worker(replicas=2), verbose=True, log_level="DEBUG",
                                            elastic_timeout=600)),
    "ours": seen(MPIJob(worker=Worker(replicas=2), slots=2, horovod=Horovod(controller="mpi", stall_timeout=30))),
    "ours_elastic": seen(HorovodJob(worker=Worker(replicas=3), min_workers=2, max_workers=3,
                                    horovod=Horovod(lost_rank_timeout=9))),
    "ours_spark": seen(HorovodSpark(num_proc=3, spark_conf={"spark.executor.cores": "3"},
                                    hadoop_conf={"fs.s3a.fast.upload": "true"}, executor_path="/opt/venv/bin/python",
                                    horovod=Horovod(stall_timeout=30))),
}))
"""


def test_every_field_of_a_v1_mpijob_horovodjob_and_horovodspark_reaches_the_flyte_2_config(tmp_path):
    ran = run_command([str(VENV_BIN / "python"), "-c", CONFIGS], cwd=tmp_path, timeout=120)
    assert ran.returncode == 0, ran.output[-3000:]
    seen = json.loads(ran.output.strip().splitlines()[-1])
    kfmpi = seen["kfmpi"]
    assert kfmpi["type"] == "flyteplugins.horovod.task.MPIJob"
    assert kfmpi["worker"] == ("Worker(command=None, image='img:1', requests=Resources(cpu='2', memory='4Gi', gpu=None, "
                               "disk=None, shm=None), limits=None, replicas=3, restart_policy='failure')")
    assert kfmpi["launcher"] == ("Launcher(command=['bash'], image=None, requests=None, limits=Resources(cpu='1', "
                                 "memory=None, gpu=None, disk=None, shm=None), replicas=1, restart_policy=None)")  # kfmpi's default
    assert kfmpi["run_policy"] == ("RunPolicy(clean_pod_policy='all', ttl_seconds_after_finished=None, "
                                   "active_deadline_seconds=None, backoff_limit=2)")
    assert kfmpi["slots"] == "2" and kfmpi["horovod"] == repr(_horovod())
    counts = seen["kfmpi_counts"]
    assert "replicas=4" in counts["worker"] and "replicas=1" in counts["launcher"]
    elastic = seen["kfmpi_elastic"]
    assert elastic["type"] == "flyteplugins.horovod.task.HorovodJob"
    assert elastic["horovod"] == repr(_horovod(verbose=True, log_level="DEBUG"))
    assert (elastic["min_workers"], elastic["max_workers"], elastic["elastic_timeout"]) == ("2", "2", "600")
    ours = seen["ours"]
    assert ours["slots"] == "2" and ours["horovod"] == repr(_horovod(controller="mpi", stall_timeout=30))
    ours_elastic = seen["ours_elastic"]
    assert (ours_elastic["min_workers"], ours_elastic["max_workers"]) == ("2", "3")
    assert ours_elastic["horovod"] == repr(_horovod(lost_rank_timeout=9, log_level="INFO"))  # kfmpi's default level
    spark = seen["ours_spark"]
    assert spark["type"] == "flyteplugins.horovod.spark.HorovodSpark"
    assert (spark["num_proc"], spark["spark_conf"], spark["hadoop_conf"], spark["executor_path"]) == \
        ("3", "{'spark.executor.cores': '3'}", "{'fs.s3a.fast.upload': 'true'}", "'/opt/venv/bin/python'")
    assert spark["horovod"] == repr(_horovod(stall_timeout=30))


def _horovod(**settings):
    from horovod_flyte_runtime.settings import Horovod

    return Horovod(**settings)
