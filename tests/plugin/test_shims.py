"""The private flytekit and pyspark internals in ``horovod_flyte_runtime._shims``: each test fails, naming what
changed, when an upgrade of flytekit or pyspark removes or changes one."""


import flytekit
import pyspark
from flytekit.core.checkpointer import SyncCheckpoint

from horovod_flyte_runtime import _shims


def test_sync_checkpoint_still_keeps_its_paths_where_the_shim_reads_them(tmp_path):
    cp = SyncCheckpoint(checkpoint_dest=str(tmp_path / "dest"), checkpoint_src=str(tmp_path / "src"))
    assert _shims.checkpoint_paths(cp) == (str(tmp_path / "dest"), str(tmp_path / "src")), (
        f"flytekit {flytekit.__version__} changed SyncCheckpoint's private fields: update _shims.checkpoint_paths")


def test_dispatch_execute_still_drops_pre_execute_attrs_with_decks_on():
    """The workaround in _shims.keep_attrs_across_dispatch is needed while this holds; if flytekit stops dropping
    the attributes, this test says so and the shim can go."""
    from flytekit import task
    from flytekit.core.context_manager import FlyteContextManager

    seen = {}

    class Marking:
        pass

    @task(enable_deck=True)
    def body() -> int:
        seen["attr"] = flytekit.current_context().has_attr("MARK")
        return 1

    def pre_execute(user_params):  # as HorovodSparkFunctionTask does: on top of Spark's pre_execute result (a copy)
        params = user_params.builder().build()
        return params.builder().add_attr("MARK", Marking()).build()

    body.pre_execute = pre_execute
    body()
    assert seen["attr"] is False, (f"flytekit {flytekit.__version__} keeps pre_execute's attributes with decks on: "
                                   "_shims.keep_attrs_across_dispatch may be removed")
    assert hasattr(FlyteContextManager.current_context().user_space_params, "_attrs"), (
        "ExecutionParameters._attrs is gone: update _shims.keep_attrs_across_dispatch")


def test_the_executor_count_is_still_reachable_through_the_java_context():
    from pyspark.sql import SparkSession

    # local mode has no executors to count; the call path through sc._jsc is what must still exist (a bare session:
    # differs from a task's, since only the pyspark internals are under test here)
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        assert _shims.executor_count(spark.sparkContext) == 0, (
            f"pyspark {pyspark.__version__}: getExecutorMemoryStatus through sc._jsc changed; update _shims")
    finally:
        spark.stop()


def test_the_error_document_helpers_of_pyflyte_execute_are_still_there():
    """_shims.write_error_document builds the error document with pyflyte-execute's own helpers (the multi-host
    pulled-cable tests read what it writes); an upgrade that renames one fails here, not on a cluster."""
    import inspect

    from flytekit.bin import entrypoint

    for name, params in {"_get_worker_name": [], "_build_error_file_name": [], "get_traceback_str": ["e"],
                         "get_container_error_timestamp": ["e"]}.items():
        fn = getattr(entrypoint, name, None)
        assert fn is not None, f"flytekit {flytekit.__version__}: entrypoint.{name} is gone; update _shims"
        assert list(inspect.signature(fn).parameters) == params, f"entrypoint.{name} changed its parameters"
    assert entrypoint._build_error_file_name() == "error.pb"


def test_what_the_interrupt_handling_relies_on_is_still_there():
    """``interrupt``: pyspark's active context, Horovod's Gloo launcher taking SIGINT over through
    ``register_shutdown_event``, and every Spark task's ``execute`` wrapped once this package is imported."""
    import inspect

    from flytekitplugins.spark.task import PysparkFunctionTask
    from horovod.runner import gloo_run
    from pyspark import SparkContext

    import flytekitplugins.horovod  # noqa: F401  (wraps PysparkFunctionTask.execute)

    assert hasattr(SparkContext, "_active_spark_context"), f"pyspark {pyspark.__version__} renamed it"
    assert "register_shutdown_event()" in inspect.getsource(gloo_run.launch_gloo), \
        "Horovod's launch_gloo no longer calls register_shutdown_event: update interrupt._seen_through_horovods_handler"
    assert getattr(PysparkFunctionTask.execute, "stops_spark_on_interrupt", False)
