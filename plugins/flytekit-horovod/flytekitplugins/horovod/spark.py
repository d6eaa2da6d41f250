"""The Spark route: a Flyte Spark task whose body can run Horovod inside the same Spark cluster."""

import contextlib
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List

from flytekit import FlyteContextManager, current_context
from flytekit.configuration import SerializationSettings
from flytekit.core.context_manager import ExecutionParameters
from flytekit.extend import ExecutionState, TaskPlugins
from flytekitplugins.spark import Spark
from flytekitplugins.spark.task import PysparkFunctionTask

from horovod_flyte_runtime import _shims
from horovod_flyte_runtime.artifacts import SaysWhere, in_working_directory, say_where
from horovod_flyte_runtime.classify import rank_of
from horovod_flyte_runtime.local_driver import sets_up_local_driver
from horovod_flyte_runtime.noise import quiet_this_process
from horovod_flyte_runtime.rank import import_path
from horovod_flyte_runtime.rank_output import log_dir
from horovod_flyte_runtime.settings import Horovod, HorovodConfigError
from horovod_flyte_runtime.spark_context import CONTEXT_ATTR, HorovodSparkContext, current_horovod_spark
from horovod_flyte_runtime.spark_session import (
    check_horovod_spark,
    horovod_spark_conf,
    importable_in_workers,
    prepare_local_session,
    session_fits,
)

from .constructs import refuse_dynamic, refuse_spark_map, spark_map_refused
from .disk_full import disk_full_error
from .errors import lost_in_horovod_launcher
from .estimator_checks import check_columns  # noqa: F401  (importing it checks every Estimator's columns first)
from .horovod_deck import add_horovod_deck
from .interrupt import stops_spark_on_interrupt

logger = logging.getLogger("flytekitplugins.horovod")


@dataclass
class HorovodSpark(Spark):
    """flytekitplugins-spark's ``Spark`` config plus the number of Horovod ranks and their settings.

    Serializes as a ``spark`` task; the executor slots Horovod needs (``num_proc`` Spark tasks at once) are
    added to ``spark_conf`` where the user left them unset, and a user's explicit values are kept.
    """

    num_proc: int = 2
    horovod: Horovod = field(default_factory=Horovod)

    def __post_init__(self):
        super().__post_init__()
        check_horovod_spark(self.num_proc, self.spark_conf, self.horovod)


class HorovodSparkFunctionTask(SaysWhere, PysparkFunctionTask):
    """A Spark task (type ``spark``) whose body runs on the driver with Horovod helpers at hand."""

    def __init__(self, task_config: HorovodSpark, task_function: Callable, **kwargs):
        super().__init__(task_config=task_config, task_function=task_function, **kwargs)
        refuse_dynamic(self)

    def get_command(self, settings: SerializationSettings) -> List[str]:
        return refuse_spark_map(self, super().get_command(settings))

    def get_custom(self, settings: SerializationSettings) -> Dict[str, Any]:
        custom = super().get_custom(settings)
        custom["sparkConf"] = horovod_spark_conf(self.task_config.spark_conf, self.task_config.num_proc)
        return custom

    def execute(self, **kwargs) -> Any:
        """The body (a rank that Horovod's launcher saw killed becomes a ``RankLostError``); then the ranks' logs
        closed, kept with the task (its raw output on a cluster) and shown in the "Horovod" Deck with the timeline
        and autotune log."""
        if not current_context().has_attr(CONTEXT_ATTR):  # pre_execute did not run: a map_task element
            raise HorovodConfigError(spark_map_refused(self))
        try:
            return super().execute(**kwargs)
        except Exception as exc:  # a full disk or a rank killed under the Estimator's backend: Flyte retries
            # a rank's line naming a full disk, where the driver saw the ranks' output (else their failure record)
            no_space = next((o.no_space for o in current_horovod_spark().outputs if o.no_space), None)
            lost = (disk_full_error(exc, no_space, rank_of(no_space) if no_space else None)
                    or lost_in_horovod_launcher(exc))
            if lost is None:
                raise
            raise lost from exc
        finally:
            horovod = current_horovod_spark()
            for output in horovod.outputs:
                output.close()
            folder, ctx = log_dir(), FlyteContextManager.current_context()
            if horovod.outputs and folder and ctx.file_access.is_remote(horovod.store_prefix):
                ctx.file_access.put_data(folder, f"{horovod.store_prefix}/logs", is_multipart=True)
                deck = f"{current_context().output_metadata_prefix}/deck.html" if self.enable_deck else None
                say_where(self.name.split(".")[-1], horovod.settings, [f"{horovod.store_prefix}/logs/"], deck)
            add_horovod_deck(horovod.settings)

    def pre_execute(self, user_params: ExecutionParameters) -> ExecutionParameters:
        quiet_this_process(self.task_config.horovod.verbose)  # the driver: the body's imports and Horovod's Spark code
        ctx = FlyteContextManager.current_context()
        local = not (ctx.execution_state and ctx.execution_state.mode == ExecutionState.Mode.TASK_EXECUTION)
        num_proc = self.task_config.num_proc
        with self._local_conf(local):
            params = super().pre_execute(user_params)
            if local and not session_fits(self.sess, num_proc):
                logger.info("replacing the running SparkSession: it lacks slots for %d ranks, a loopback driver "
                            "address or this Python", num_proc)
                self.sess.stop()
                params = super().pre_execute(user_params)
        prefix = user_params.raw_output_prefix
        if not ctx.file_access.is_remote(prefix):
            prefix = os.path.join(str(user_params.working_directory), "horovod")
        else:
            prefix = f"{prefix.rstrip('/')}/horovod"
        if self.sess.sparkContext.master.startswith("local"):
            importable_in_workers(self.sess, import_path(self.task_function))
        settings = self.task_config.horovod
        # locally a relative timeline lands in the task's working directory; an executor has none on a cluster
        horovod = HorovodSparkContext(num_proc, in_working_directory(settings) if local else settings, self.sess,
                                      prefix)
        params = params.builder().add_attr(CONTEXT_ATTR, horovod).build()
        _shims.keep_attrs_across_dispatch(user_params, params)
        return params

    @contextlib.contextmanager
    def _local_conf(self, local: bool) -> Iterator[None]:
        """In a local run, the session gets ``prepare_local_session`` where the task's ``spark_conf`` is silent."""
        config = self.task_config
        original = config.spark_conf
        if local:
            config.spark_conf = prepare_local_session(config.num_proc, original)
        try:
            yield
        finally:
            config.spark_conf = original


TaskPlugins.register_pythontask_plugin(HorovodSpark, HorovodSparkFunctionTask)
# every Spark task, the plain ones of flytekitplugins-spark too, ends a Ctrl-C as InterruptedByUser (see interrupt), and
# starts a local run's driver quick and quiet (see local_driver)
PysparkFunctionTask.execute = stops_spark_on_interrupt(PysparkFunctionTask.execute)
PysparkFunctionTask.pre_execute = sets_up_local_driver(PysparkFunctionTask.pre_execute)
