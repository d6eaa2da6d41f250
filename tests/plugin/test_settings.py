"""Horovod settings: one table turns them into environment variables, horovodrun flags and mpirun -x pairs."""

import pytest

from flytekitplugins.horovod import Horovod, HorovodConfigError


def test_defaults_set_only_the_start_timeout():
    assert Horovod().env() == {"HOROVOD_START_TIMEOUT": "60"}
    assert Horovod().horovodrun_args() == ["--gloo", "--start-timeout", "60"]


def test_every_setting_becomes_env_and_flag():
    s = Horovod(
        controller="mpi",
        fusion_threshold_mb=64,
        cycle_time_ms=3.5,
        cache_capacity=2048,
        autotune=True,
        autotune_log_file="/tmp/at.csv",
        timeline_filename="/tmp/tl.json",
        timeline_mark_cycles=True,
        hierarchical_allreduce=True,
        hierarchical_allgather=True,
        log_level="debug",
        start_timeout=90,
        verbose=True,
    )
    assert s.env() == {
        "HOROVOD_FUSION_THRESHOLD": str(64 * 1024 * 1024),
        "HOROVOD_CYCLE_TIME": "3.5",
        "HOROVOD_CACHE_CAPACITY": "2048",
        "HOROVOD_AUTOTUNE": "1",
        "HOROVOD_AUTOTUNE_LOG": "/tmp/at.csv",
        "HOROVOD_TIMELINE": "/tmp/tl.json",
        "HOROVOD_TIMELINE_MARK_CYCLES": "1",
        "HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
        "HOROVOD_HIERARCHICAL_ALLGATHER": "1",
        "HOROVOD_LOG_LEVEL": "DEBUG",
        "HOROVOD_START_TIMEOUT": "90",
    }
    assert s.horovodrun_args() == [
        "--mpi", "--start-timeout", "90",
        "--fusion-threshold-mb", "64",
        "--cycle-time-ms", "3.5",
        "--cache-capacity", "2048",
        "--autotune",
        "--autotune-log-file", "/tmp/at.csv",
        "--timeline-filename", "/tmp/tl.json",
        "--timeline-mark-cycles",
        "--hierarchical-allreduce",
        "--hierarchical-allgather",
        "--log-level", "DEBUG",
        "--verbose",
    ]
    pairs = s.mpirun_args()
    assert pairs[::2] == ["-x"] * len(s.env())
    assert set(pairs[1::2]) == {f"{k}={v}" for k, v in s.env().items()}


def test_horovodrun_accepts_the_flags():
    """The flags parse with horovodrun's own argument parser (not just our idea of them)."""
    from horovod.runner.launch import parse_args
    import sys

    s = Horovod(fusion_threshold_mb=8, cycle_time_ms=1, autotune=True, autotune_log_file="a.csv",
                timeline_filename="t.json", timeline_mark_cycles=True, hierarchical_allreduce=True,
                hierarchical_allgather=True, cache_capacity=16, log_level="INFO")
    argv = sys.argv
    try:
        sys.argv = ["horovodrun", "-np", "2"] + s.horovodrun_args() + ["python", "x.py"]
        args = parse_args()
    finally:
        sys.argv = argv
    assert args.use_gloo and args.fusion_threshold_mb == 8 and args.cycle_time_ms == 1
    assert args.autotune and args.autotune_log_file == "a.csv"
    assert args.timeline_filename == "t.json" and args.timeline_mark_cycles
    assert args.hierarchical_allreduce and args.hierarchical_allgather and args.cache_capacity == 16


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"controller": "nccl"}, "controller='nccl' is not one of gloo, mpi"),
        ({"fusion_threshold_mb": -1}, "fusion_threshold_mb=-1 must not be negative"),
        ({"cache_capacity": -5}, "cache_capacity=-5 must not be negative"),
        ({"cycle_time_ms": 0}, "cycle_time_ms=0 must be positive"),
        ({"start_timeout": 0}, "start_timeout=0 must be positive"),
        ({"log_level": "loud"}, "log_level='loud' is not one of"),
        ({"autotune_log_file": "x.csv"}, "autotune_log_file is set but autotune is off"),
        ({"timeline_mark_cycles": True}, "timeline_mark_cycles is set but timeline_filename is not"),
    ],
)
def test_invalid_settings_fail_when_built(kwargs, message):
    with pytest.raises(HorovodConfigError, match="invalid Horovod settings: .*" + message.replace("(", r"\(")):
        Horovod(**kwargs)


def test_settings_round_trip_through_json():
    s = Horovod(controller="mpi", fusion_threshold_mb=1.5, fp16_compression=True)
    assert Horovod.from_json(s.to_json()) == s
