"""Plain flytekitplugins-spark tasks that report how their local driver JVM was started (test_local_driver.py)."""

import typing

import flytekit
from flytekit import task, workflow
from flytekitplugins.spark import Spark

import flytekitplugins.horovod  # noqa: F401  (a user's workflow with Horovod tasks imports the plugin)

Jvm = typing.NamedTuple("Jvm", [("options", typing.List[str]), ("collectors", typing.List[str]),
                                 ("archives", typing.List[str])])


def _driver_jvm() -> Jvm:
    jvm = flytekit.current_context().spark_session.sparkContext._jvm
    management = jvm.java.lang.management.ManagementFactory
    with open(f"/proc/{jvm.java.lang.ProcessHandle.current().pid()}/maps") as maps:  # the class archives it mapped
        archives = sorted({line.split()[-1] for line in maps if line.rstrip().endswith(".jsa")})
    return Jvm([str(option) for option in management.getRuntimeMXBean().getInputArguments()],
               [str(bean.getName()) for bean in management.getGarbageCollectorMXBeans()], archives)


@task(task_config=Spark(spark_conf={"spark.ui.enabled": "false"}))
def default_driver() -> Jvm:
    return _driver_jvm()


@task(task_config=Spark(spark_conf={"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": "-XX:+UseG1GC"}))
def g1_driver() -> Jvm:
    return _driver_jvm()


@task(task_config=Spark(spark_conf={"spark.ui.enabled": "false", "spark.driver.extraClassPath": "/nonexistent.jar"}))
def other_class_path_driver() -> Jvm:
    return _driver_jvm()


@workflow
def other_class_path_driver_wf() -> Jvm:
    return other_class_path_driver()


@workflow
def default_driver_wf() -> Jvm:
    return default_driver()


@workflow
def g1_driver_wf() -> Jvm:
    return g1_driver()
