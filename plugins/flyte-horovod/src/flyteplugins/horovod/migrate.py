"""v1 configs as Flyte 2 ones, for ``pyflyte-migrate`` (flyte-migrate): kfmpi's and ``flytekitplugins.horovod``'s
``MPIJob`` and ``HorovodJob``, and ``flytekitplugins.horovod``'s ``HorovodSpark``, become this plugin's configs of the
same names, field for field, so a v1 file's MPI, elastic and Spark-route Horovod tasks run with real ranks on Flyte 2,
the file unchanged.

flyte-migrate looks a transformer up by the v1 config's class name (``flyte_migrate._plugins.register_plugin``, a
private module: the ``migrate`` extra pins the versions this was tested with). ``flyteplugins.horovod_migrate``
registers these when flyte-migrate loads flytekit.
"""

from typing import Any, Dict, Optional

from horovod_flyte_runtime.settings import Horovod

from .task import HorovodJob, Launcher, MPIJob, RunPolicy, Worker


def _enum_value(value: Any) -> Optional[str]:
    """kfmpi's ``RestartPolicy`` / ``CleanPodPolicy`` member as this plugin's lower-case literal."""
    return None if value is None else value.name.lower()


def _resources(resources: Any) -> Any:
    from flyte_migrate._resource import _transform_resource_v1_to_v2

    return None if resources is None else _transform_resource_v1_to_v2(resources=resources)


def _pods(v1_spec: Any, kind: type, replicas: Optional[int]) -> Any:
    """kfmpi's ``Worker`` or ``Launcher`` as this plugin's; ``replicas`` from kfmpi's deprecated count where set."""
    return kind(command=v1_spec.command, image=v1_spec.image, requests=_resources(v1_spec.requests),
                limits=_resources(v1_spec.limits), replicas=replicas or v1_spec.replicas,
                restart_policy=_enum_value(v1_spec.restart_policy))


def _common(v1_config: Any) -> Dict[str, Any]:
    """The fields every MPI config has: pods, run policy, slots, and the Horovod settings (kfmpi has none)."""
    policy = v1_config.run_policy
    return {
        "launcher": _pods(v1_config.launcher, Launcher, v1_config.num_launcher_replicas),
        "worker": _pods(v1_config.worker, Worker, v1_config.num_workers),
        "run_policy": None if policy is None else RunPolicy(
            clean_pod_policy=_enum_value(policy.clean_pod_policy),
            ttl_seconds_after_finished=policy.ttl_seconds_after_finished,
            active_deadline_seconds=policy.active_deadline_seconds, backoff_limit=policy.backoff_limit),
        "slots": v1_config.slots,
        "horovod": getattr(v1_config, "horovod", None) or Horovod(),
    }


def mpi_job(v1_config: Any) -> MPIJob:
    """kfmpi's or ``flytekitplugins.horovod``'s ``MPIJob`` as this plugin's ``MPIJob``."""
    return MPIJob(**_common(v1_config))


def horovod_job(v1_config: Any) -> HorovodJob:
    """kfmpi's or ``flytekitplugins.horovod``'s ``HorovodJob`` as this plugin's: kfmpi's ``verbose`` and
    ``log_level`` go into the Horovod settings as the v1 plugin puts them (it has done so already for its own).
    ``discovery_script_path`` names the operator's script in a cluster's launcher pod; a local run writes its own."""
    common = _common(v1_config)
    common["horovod"] = common["horovod"].with_kfmpi_logging(v1_config.verbose, v1_config.log_level)
    return HorovodJob(**common, min_workers=getattr(v1_config, "min_workers", None),
                      max_workers=getattr(v1_config, "max_workers", None), elastic_timeout=v1_config.elastic_timeout)


def horovod_spark(v1_config: Any) -> Any:
    """``flytekitplugins.horovod``'s ``HorovodSpark`` as this plugin's: flyte-migrate's own transform of the ``Spark``
    fields (pod templates included), plus ``num_proc`` and the Horovod settings."""
    from dataclasses import fields

    from flyte_migrate._plugins.spark import _transform_spark_config_v1_to_v2

    from .spark import HorovodSpark

    spark = _transform_spark_config_v1_to_v2(v1_config)
    return HorovodSpark(**{f.name: getattr(spark, f.name) for f in fields(spark)}, num_proc=v1_config.num_proc,
                        horovod=v1_config.horovod)
