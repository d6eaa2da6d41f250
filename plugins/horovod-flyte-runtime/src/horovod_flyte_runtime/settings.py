"""Typed Horovod settings, turned into ``HOROVOD_*`` environment variables and launcher flags in one place."""

import dataclasses
import importlib
import json
import logging
import os
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from .body_framework import FALLBACK, body_framework
from .frameworks import FRAMEWORK_BUILDS
from .mpirun_keepalive import daemon_keepalive

logger = logging.getLogger("flytekitplugins.horovod")
CONTROLLERS = ("gloo", "mpi")
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")
# The Horovod module whose ``init()`` a rank runs before the task body, per framework (None: the body initialises it).
FRAMEWORKS = {name: build.module for name, build in FRAMEWORK_BUILDS.items()}
ARTIFACTS = ("timeline_filename", "autotune_log_file")  # the files Horovod's rank 0 writes
AUTO = "auto"  # Horovod(framework=AUTO): the framework the task body's code names (``for_body``)
SETTINGS_ENV = "FLYTE_HOROVOD_SETTINGS"  # the settings as JSON, so every rank can read them back


class HorovodConfigError(ValueError):
    """A Horovod setting has a value Horovod cannot use."""


def whole_number(value: Any, at_least: Optional[int] = None) -> bool:
    """Whether ``value`` is a whole number (an ``int``; ``True`` and ``2.0`` are not) of at least ``at_least``: the
    check of every count (ranks, replicas, slots, epochs)."""
    return isinstance(value, int) and not isinstance(value, bool) and (at_least is None or value >= at_least)


@dataclass(frozen=True)
class _Knob:
    """How one field reaches Horovod: its environment variable, its horovodrun flag, how a value is written."""

    env: str
    flag: str
    to_env: Callable[[Any], str] = str
    to_flag: Optional[Callable[[Any], str]] = str  # None: a switch (flag present when the value is true)


def _on(value: bool) -> str:
    return "1"


# One table for every setting; Horovod.env(), .horovodrun_args() and .mpirun_args() all read it.
_KNOBS: Dict[str, _Knob] = {
    "fusion_threshold_mb": _Knob(
        "HOROVOD_FUSION_THRESHOLD", "--fusion-threshold-mb", lambda mb: str(int(mb) * 1024 * 1024), lambda mb: str(int(mb))
    ),
    "cycle_time_ms": _Knob("HOROVOD_CYCLE_TIME", "--cycle-time-ms", lambda ms: f"{ms:g}", lambda ms: f"{ms:g}"),
    "cache_capacity": _Knob("HOROVOD_CACHE_CAPACITY", "--cache-capacity"),
    "autotune": _Knob("HOROVOD_AUTOTUNE", "--autotune", _on, None),
    "autotune_log_file": _Knob("HOROVOD_AUTOTUNE_LOG", "--autotune-log-file"),
    "timeline_filename": _Knob("HOROVOD_TIMELINE", "--timeline-filename"),
    "timeline_mark_cycles": _Knob("HOROVOD_TIMELINE_MARK_CYCLES", "--timeline-mark-cycles", _on, None),
    "hierarchical_allreduce": _Knob("HOROVOD_HIERARCHICAL_ALLREDUCE", "--hierarchical-allreduce", _on, None),
    "hierarchical_allgather": _Knob("HOROVOD_HIERARCHICAL_ALLGATHER", "--hierarchical-allgather", _on, None),
    "log_level": _Knob("HOROVOD_LOG_LEVEL", "--log-level"),
}


@dataclass
class Horovod:
    """Horovod settings for a task, shared by the MPI route and the Spark route.

    Args:
        controller: "gloo" (no MPI needed) or "mpi" (OpenMPI's mpirun launches the ranks).
        framework: the Horovod module each rank initialises before the body runs: "auto" (default: the one the
            body's code names, see ``body_framework``; "tensorflow" where it names none), "tensorflow", "keras"
            (standalone Keras 2), "pytorch" or "mxnet" (Horovod must be built with it); None leaves ``hvd.init()`` to
            the body.
        fusion_threshold_mb: tensor fusion buffer size in whole MB, as horovodrun's ``--fusion-threshold-mb`` takes
            it (Horovod's default is 128 MB; 0 disables fusion).
        cycle_time_ms: how long the background thread waits between fusion cycles.
        cache_capacity: response cache size (0 disables it).
        autotune: let Horovod tune fusion threshold and cycle time while training.
        autotune_log_file: where autotune writes the values it tried (needs autotune).
        timeline_filename: write a Horovod timeline (Chrome trace JSON) to this path.
        timeline_mark_cycles: mark fusion cycles in the timeline (needs timeline_filename).
        hierarchical_allreduce / hierarchical_allgather: two-level collectives (within, then across hosts).
        fp16_compression: compress gradients to fp16 for allreduce; read it in the task body through
            ``compression()`` and pass it to ``hvd.DistributedOptimizer(..., compression=...)``.
        start_timeout: seconds to wait for all ranks to start before failing.
        lost_rank_timeout: seconds rank 0 waits to hear from a rank before it fails the task naming that rank and
            its host as lost (a host or network link gone, a frozen process); None turns the check off. Horovod's
            collectives alone would wait forever (MPI) or blame the rank that waited (Gloo).
        stall_timeout: seconds ranks may be out of step (some ranks submitted a collective, others not) before the
            task fails naming the tensors and the missing ranks (``StalledRanksError``): Horovod's stall check
            (``HOROVOD_STALL_SHUTDOWN_TIME_SECONDS``; it warns from a quarter of this time, at most 60 s). Ranks that
            compute in step, however long, are never stopped. None turns the stall check off (a stalled job waits
            forever).
        log_level: Horovod's own log level (TRACE, DEBUG, INFO, WARNING, ERROR, FATAL).
        verbose: make the launchers log what they start (commands, hosts, environment) and pass
            ``--verbose`` to horovodrun / a verbose level to horovod.spark.
    """

    controller: str = "gloo"
    framework: Optional[str] = AUTO
    fusion_threshold_mb: Optional[float] = None
    cycle_time_ms: Optional[float] = None
    cache_capacity: Optional[int] = None
    autotune: bool = False
    autotune_log_file: Optional[str] = None
    timeline_filename: Optional[str] = None
    timeline_mark_cycles: bool = False
    hierarchical_allreduce: bool = False
    hierarchical_allgather: bool = False
    fp16_compression: bool = False
    start_timeout: int = 60
    lost_rank_timeout: Optional[float] = 20.0
    stall_timeout: Optional[int] = 300
    log_level: Optional[str] = None
    verbose: bool = False

    def __post_init__(self):
        problems = _type_problems(self)
        if not problems:
            problems = self._value_problems()
        if problems:
            raise HorovodConfigError("invalid Horovod settings: " + "; ".join(problems))
        if self.log_level is not None:
            self.log_level = self.log_level.upper()

    def _value_problems(self) -> List[str]:
        problems = []
        if self.controller not in CONTROLLERS:
            problems.append(f"controller={self.controller!r} is not one of {', '.join(CONTROLLERS)}")
        if self.framework is not None and self.framework not in (AUTO, *FRAMEWORKS):
            problems.append(f"framework={self.framework!r} is not one of {', '.join((AUTO, *FRAMEWORKS))} or None")
        for name in ("fusion_threshold_mb", "cache_capacity"):
            value = getattr(self, name)
            if value is not None and value < 0:
                problems.append(f"{name}={value} must not be negative (0 disables it)")
        if self.fusion_threshold_mb is not None and self.fusion_threshold_mb != int(self.fusion_threshold_mb):
            problems.append(f"fusion_threshold_mb={self.fusion_threshold_mb} must be a whole number of MB "
                            "(horovodrun's --fusion-threshold-mb is an integer)")
        if self.cycle_time_ms is not None and self.cycle_time_ms <= 0:
            problems.append(f"cycle_time_ms={self.cycle_time_ms} must be positive")
        if self.start_timeout <= 0:
            problems.append(f"start_timeout={self.start_timeout} must be positive (seconds)")
        if self.lost_rank_timeout is not None and self.lost_rank_timeout <= 0:
            problems.append(f"lost_rank_timeout={self.lost_rank_timeout} must be positive (seconds) or None")
        if self.stall_timeout is not None and self.stall_timeout < 1:
            problems.append(f"stall_timeout={self.stall_timeout} must be at least 1 (seconds) or None")
        if self.log_level is not None and self.log_level.upper() not in LOG_LEVELS:
            problems.append(f"log_level={self.log_level!r} is not one of {', '.join(LOG_LEVELS)}")
        if self.autotune_log_file and not self.autotune:
            problems.append("autotune_log_file is set but autotune is off")
        if self.timeline_mark_cycles and not self.timeline_filename:
            problems.append("timeline_mark_cycles is set but timeline_filename is not")
        return problems

    def _set_knobs(self) -> List[Tuple[_Knob, Any]]:
        """The knobs that are set: None means unset, False means a switch that is off; 0 is a value."""
        return [
            (knob, getattr(self, name))
            for name, knob in _KNOBS.items()
            if getattr(self, name) is not None and getattr(self, name) is not False
        ]

    def env(self) -> Dict[str, str]:
        """The ``HOROVOD_*`` environment variables for these settings (only the ones that are set)."""
        env = {knob.env: knob.to_env(value) for knob, value in self._set_knobs()}
        env["HOROVOD_START_TIMEOUT"] = str(self.start_timeout)
        if self.stall_timeout is None:
            env["HOROVOD_STALL_CHECK_DISABLE"] = "1"
        else:
            env["HOROVOD_STALL_CHECK_TIME_SECONDS"] = str(self.stall_warning_time())
            env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] = str(self.stall_timeout)
        return env

    def stall_warning_time(self) -> int:
        """When Horovod's stall check first warns (and how often it looks): a quarter of ``stall_timeout``, at most
        Horovod's own 60 s, so the job fails at most this long after ``stall_timeout``."""
        return max(1, min(60, (self.stall_timeout or 0) // 4))

    def horovodrun_args(self) -> List[str]:
        """``horovodrun`` flags for these settings, controller first."""
        args = [f"--{self.controller}", "--start-timeout", str(self.start_timeout)]
        if self.stall_timeout is None:
            args.append("--no-stall-check")
        else:
            args += ["--stall-check-warning-time-seconds", str(self.stall_warning_time()),
                     "--stall-check-shutdown-time-seconds", str(self.stall_timeout)]
        for knob, value in self._set_knobs():
            args += [knob.flag] if knob.to_flag is None else [knob.flag, knob.to_flag(value)]
        if self.verbose:
            args.append("--verbose")
        return args

    def mpirun_args(self) -> List[str]:
        """``mpirun`` ``-x VAR=value`` pairs that export these settings to every rank, and the TCP keepalive of
        mpirun's connections to its remote daemons (see ``lost_rank_timeout``)."""
        args: List[str] = []
        for name, value in sorted(self.env().items()):
            args += ["-x", f"{name}={value}"]
        if self.lost_rank_timeout is not None:
            for name, value in daemon_keepalive(self.lost_rank_timeout).items():
                args += ["-mca", name, str(value)]
        return args

    def for_body(self, fn: Callable) -> "Horovod":
        """These settings for the body ``fn``: ``framework="auto"`` replaced by the framework ``fn``'s code names
        (``body_framework``), or "tensorflow" (logged, with how to choose) where it names none or several."""
        if self.framework != AUTO:
            return self
        framework = body_framework(fn)
        if framework is None:
            framework = FALLBACK
            logger.warning("Horovod(framework='auto'): %s names no single framework, so each rank initialises %s; "
                           "set Horovod(framework=...) to choose (None leaves hvd.init() to the body)",
                           getattr(fn, "__qualname__", fn), FRAMEWORKS[framework])
        return dataclasses.replace(self, framework=framework)

    def with_kfmpi_logging(self, verbose: Optional[bool], log_level: Optional[str]) -> "Horovod":
        """These settings with kfmpi ``HorovodJob``'s ``verbose`` and ``log_level`` where they leave them unset (the v1
        ``HorovodJob``, and the Flyte 2 one ``pyflyte-migrate`` makes from a v1 config)."""
        return dataclasses.replace(self, verbose=self.verbose or bool(verbose), log_level=self.log_level or log_level)

    def files_in(self, folder: str) -> "Horovod":
        """These settings with a relative ``timeline_filename`` or ``autotune_log_file`` made a whole path in
        ``folder`` (a task's working directory): Horovod would write it relative to wherever each rank started."""
        files = {name: os.path.join(folder, getattr(self, name)) for name in ARTIFACTS
                 if getattr(self, name) and not os.path.isabs(getattr(self, name))}
        return dataclasses.replace(self, **files) if files else self

    def check_before_launch(self) -> None:
        """Fail before any rank starts: the framework is one this Horovod build lacks, or a file Horovod will write
        has no folder on this host."""
        self.check_framework()
        for name in ARTIFACTS:
            path = getattr(self, name)
            folder = os.path.dirname(os.path.abspath(path)) if path else None
            if folder and not os.path.isdir(folder):
                raise HorovodConfigError(f"Horovod({name}={path!r}): the folder {folder} does not exist on this host")

    def check_framework(self) -> None:
        """Raise a ``HorovodConfigError`` naming the framework, what this Horovod build serves and how to rebuild,
        when the build lacks ``framework`` (checked on disk, nothing imported: see ``build_info``)."""
        from .build_info import framework_built, missing_framework  # here: `python -m .build_info` runs it as main

        if self.framework not in (None, AUTO) and not framework_built(self.framework):
            raise HorovodConfigError(missing_framework(self.framework))

    def module(self) -> Optional[Any]:
        """The chosen framework's Horovod module (``horovod.tensorflow`` ...), or None when ``framework`` is None (or
        "auto", not yet resolved by ``for_body``)."""
        if self.framework in (None, AUTO):
            return None
        self.check_framework()
        try:
            return importlib.import_module(FRAMEWORKS[self.framework])
        except ImportError as exc:
            raise HorovodConfigError(
                f"Horovod(framework={self.framework!r}): {FRAMEWORKS[self.framework]} cannot be imported ({exc}); "
                "is Horovod built with this framework (horovodrun --check-build)?"
            ) from exc

    def init_horovod(self) -> Optional[Any]:
        """Run ``init()`` of the chosen framework's Horovod module and return the module (None: no framework)."""
        hvd = self.module()
        if hvd is not None:
            hvd.init()
        return hvd

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Horovod":
        return cls(**json.loads(text))


def _type_problems(obj: Any) -> List[str]:
    """Fields whose value does not have the declared type (bool is not accepted for a number, nor 2.5 for an int)."""
    problems = []
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, hint = getattr(obj, f.name), hints[f.name]
        allowed = tuple(t for t in typing.get_args(hint) if t is not type(None)) or (hint,)
        if value is None and type(None) in typing.get_args(hint):
            continue
        if float in allowed:
            allowed += (int,)
        ok = isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)
        if not ok:
            names = " or ".join(t.__name__ for t in allowed if t is not int or float not in allowed)
            problems.append(f"{f.name}={value!r} must be {names}{' or None' if type(None) in typing.get_args(hint) else ''}")
    return problems
