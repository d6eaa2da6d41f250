"""Flyte constructs a Horovod task cannot take, refused when the task is declared or serialized, naming why.

What each construct does on a cluster is read from flytepropeller v1.16.8 (see ``docs/mpi-route.md`` and
``docs/spark-route.md``, "Flyte constructs"); ``map_task`` over an ``MPIJob``/``HorovodJob`` task runs (one MPIJob per
element), the two cases below cannot.
"""

from typing import List

from flytekit import PythonFunctionTask

from horovod_flyte_runtime.settings import HorovodConfigError

MAP_ENTRYPOINT = "pyflyte-map-execute"  # flytekit's ArrayNodeMapTask.get_command: what each map element runs


def refuse_dynamic(task: PythonFunctionTask) -> None:
    """``@dynamic`` with a Horovod config: its body would train on every rank (or the Spark driver) while flytekit
    compiles it into a workflow; a plain ``@dynamic`` may call Horovod tasks instead."""
    if task.execution_mode != PythonFunctionTask.ExecutionBehavior.DEFAULT:
        raise HorovodConfigError(
            f"{task.name}: @dynamic (or @eager) with task_config={type(task.task_config).__name__}(...) is not "
            "supported: such a body builds a workflow once, while a Horovod task's body is the training itself; "
            "declare the Horovod task with @task and call it from a plain @dynamic")


def refuse_spark_map(task: PythonFunctionTask, command: List[str]) -> List[str]:
    """``command`` unless it runs a ``map_task`` element: flytekit's ``ArrayNodeMapTask`` (1.16) calls the task's
    ``execute`` without its ``pre_execute``, which starts the SparkSession and the Horovod context the body needs."""
    if MAP_ENTRYPOINT in command:
        raise HorovodConfigError(spark_map_refused(task))
    return command


def spark_map_refused(task: PythonFunctionTask) -> str:
    """Why ``map_task`` over the HorovodSpark ``task`` cannot run, and what to do instead."""
    return (f"map_task over {task.name} (a HorovodSpark task) cannot run: flytekit's map task (ArrayNodeMapTask) runs "
            "each element's execute() without the task's pre_execute(), which starts the SparkSession and Horovod's "
            "Spark context, so no element could train, locally or on a cluster; loop over the inputs inside one "
            "HorovodSpark task, or map over an MPIJob task")
