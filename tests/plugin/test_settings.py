"""Horovod settings: one table turns them into environment variables, horovodrun flags and mpirun -x pairs."""

import pytest

from flytekitplugins.horovod import Horovod, HorovodConfigError

STALL_CHECK = ["--stall-check-warning-time-seconds", "60", "--stall-check-shutdown-time-seconds", "300"]


def test_defaults_set_only_the_start_timeout_and_the_stall_check():
    assert Horovod().env() == {"HOROVOD_START_TIMEOUT": "60", "HOROVOD_STALL_CHECK_TIME_SECONDS": "60",
                               "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "300"}
    assert Horovod().horovodrun_args() == ["--gloo", "--start-timeout", "60", *STALL_CHECK]


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
        "HOROVOD_STALL_CHECK_TIME_SECONDS": "60",
        "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "300",
    }
    assert s.horovodrun_args() == [
        "--mpi", "--start-timeout", "90", *STALL_CHECK,
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
    args = s.mpirun_args()
    pairs, mca = args[:2 * len(s.env())], args[2 * len(s.env()):]
    assert pairs[::2] == ["-x"] * len(s.env())
    assert set(pairs[1::2]) == {f"{k}={v}" for k, v in s.env().items()}
    assert mca == ["-mca", "oob_tcp_keepalive_time", "10", "-mca", "oob_tcp_keepalive_intvl", "5",
                   "-mca", "oob_tcp_keepalive_probes", "6"]


@pytest.mark.serial  # asserts how fast: alone, not beside other tests (make test)
def test_mpirun_keepalive_outlasts_the_lost_rank_timeout_and_is_openmpis_own():
    """mpirun must give up on a lost host's daemon only after rank 0 reported the lost rank (probes x interval >
    lost_rank_timeout), within a minute by default, and with parameters this OpenMPI really has."""
    import subprocess

    for timeout in (5, 20.0, 45):
        args = Horovod(lost_rank_timeout=timeout).mpirun_args()
        mca = {args[i + 1]: int(args[i + 2]) for i in range(len(args)) if args[i] == "-mca"}
        assert mca["oob_tcp_keepalive_intvl"] * mca["oob_tcp_keepalive_probes"] >= timeout + 10, (timeout, mca)
    assert "-mca" not in Horovod(lost_rank_timeout=None).mpirun_args()
    from horovod_flyte_runtime.mpirun_keepalive import mpirun_notices_lost_host_within

    assert mpirun_notices_lost_host_within(20.0) <= 45
    known = subprocess.run(["ompi_info", "--param", "oob", "tcp", "--level", "9"], capture_output=True, text=True,
                           check=True).stdout
    for name in mca:
        assert f'"{name}"' in known, f"OpenMPI has no MCA parameter {name}"


def test_horovodrun_accepts_the_flags():
    """The flags parse with horovodrun's own argument parser (not just our idea of them)."""
    import sys

    from horovod.runner.launch import parse_args

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


@pytest.mark.parametrize("settings", [
    Horovod(),
    Horovod(fusion_threshold_mb=0, cache_capacity=0, hierarchical_allreduce=True),
    Horovod(fusion_threshold_mb=8.0, cycle_time_ms=1.5, autotune=True, autotune_log_file="a.csv", log_level="info",
            timeline_filename="t.json", timeline_mark_cycles=True, hierarchical_allgather=True, cache_capacity=16,
            start_timeout=90),
    Horovod(stall_timeout=None),
    Horovod(stall_timeout=7),
], ids=["defaults", "zeros", "every-knob", "no-stall-check", "stall-timeout"])
def test_env_is_what_horovodrun_itself_makes_of_the_flags(settings, monkeypatch):
    """Horovod.env() (what the local launcher and Spark give each rank, and mpirun's -x pairs) equals what
    horovodrun (the cluster launcher's command) makes of Horovod.horovodrun_args() with its own parser and
    config_parser.set_env_from_args: one meaning per setting on every route."""
    from horovod.runner.common.util import config_parser
    from horovod.runner.launch import parse_args

    monkeypatch.delenv("HOROVOD_START_TIMEOUT", raising=False)  # else it is horovodrun's default for the flag
    monkeypatch.setattr("sys.argv", ["horovodrun", "-np", "2", *settings.horovodrun_args(), "python", "x.py"])
    args, theirs = parse_args(), {}
    config_parser.set_env_from_args(theirs, args)
    ours = settings.env()
    mpirun = settings.mpirun_args()
    assert {f"{name}={value}" for name, value in ours.items()} == {
        mpirun[i + 1] for i, flag in enumerate(mpirun) if flag == "-x"}  # mpirun exports exactly these
    assert int(ours.pop("HOROVOD_START_TIMEOUT")) == args.start_timeout == settings.start_timeout
    assert ours == theirs


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"controller": "nccl"}, "controller='nccl' is not one of gloo, mpi"),
        ({"fusion_threshold_mb": -1}, "fusion_threshold_mb=-1 must not be negative"),
        ({"fusion_threshold_mb": 0.5}, "fusion_threshold_mb=0.5 must be a whole number of MB"),
        ({"cache_capacity": -5}, "cache_capacity=-5 must not be negative"),
        ({"cycle_time_ms": 0}, "cycle_time_ms=0 must be positive"),
        ({"start_timeout": 0}, "start_timeout=0 must be positive"),
        ({"lost_rank_timeout": 0}, "lost_rank_timeout=0 must be positive"),
        ({"lost_rank_timeout": "20"}, "lost_rank_timeout='20' must be float or None"),
        ({"log_level": "loud"}, "log_level='loud' is not one of"),
        ({"autotune_log_file": "x.csv"}, "autotune_log_file is set but autotune is off"),
        ({"timeline_mark_cycles": True}, "timeline_mark_cycles is set but timeline_filename is not"),
        ({"framework": "jax"}, "framework='jax' is not one of auto, tensorflow, keras, pytorch, mxnet or None"),
        ({"fp16_compression": "zstd"}, "fp16_compression='zstd' must be bool"),
        ({"hierarchical_allreduce": "no"}, "hierarchical_allreduce='no' must be bool"),
        ({"cache_capacity": 2.5}, "cache_capacity=2.5 must be int or None"),
        ({"start_timeout": True}, "start_timeout=True must be int"),
        ({"fusion_threshold_mb": "64"}, "fusion_threshold_mb='64' must be float or None"),
    ],
)
def test_invalid_settings_fail_when_built(kwargs, message):
    with pytest.raises(HorovodConfigError, match="invalid Horovod settings: .*" + message.replace("(", r"\(")):
        Horovod(**kwargs)


def test_settings_round_trip_through_json():
    s = Horovod(controller="mpi", fusion_threshold_mb=2.0, fp16_compression=True)
    assert Horovod.from_json(s.to_json()) == s


def test_zero_is_a_value_not_unset():
    """0 disables fusion and the response cache (Horovod's own meaning); it must reach the ranks, not be dropped."""
    s = Horovod(fusion_threshold_mb=0, cache_capacity=0)
    assert s.env()["HOROVOD_FUSION_THRESHOLD"] == "0" and s.env()["HOROVOD_CACHE_CAPACITY"] == "0"
    assert s.horovodrun_args()[-4:] == ["--fusion-threshold-mb", "0", "--cache-capacity", "0"]


def test_a_timeline_in_a_missing_folder_is_refused_before_ranks_start(tmp_path):
    from flytekitplugins.horovod import HorovodRunner

    missing = tmp_path / "no-such-folder" / "timeline.json"
    with pytest.raises(HorovodConfigError, match=f"the folder {tmp_path / 'no-such-folder'} does not exist"):
        HorovodRunner(np=-2, settings=Horovod(timeline_filename=str(missing))).run(len)


def test_a_framework_horovod_was_not_built_with_is_named():
    with pytest.raises(HorovodConfigError, match=r"framework='mxnet'\): MXNet \(the 'mxnet' package\) is not installed; "
                                                 r"this build serves: tensorflow, keras, pytorch\. .*HOROVOD_WITH_MXNET=1"):
        Horovod(framework="mxnet").init_horovod()
    assert Horovod(framework=None).init_horovod() is None  # the body initialises Horovod itself


@pytest.mark.parametrize("np_", ["2", 0, 2.0, True])
def test_horovod_runner_refuses_a_rank_count_that_is_not_a_whole_number(np_):
    from flytekitplugins.horovod import HorovodRunner

    with pytest.raises(HorovodConfigError, match=f"HorovodRunner\\(np={np_!r}\\): np must be a whole number"):
        HorovodRunner(np=np_)
