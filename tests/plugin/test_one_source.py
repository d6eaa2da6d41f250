"""One source per setting: HorovodJob's kfmpi ``verbose``/``log_level`` and its ``Horovod`` settings reach horovodrun
once; every count is checked by one validator; ``fill_job_defaults`` fills what kfmpi leaves unset."""

import pytest
from flytekit import task
from flytekit.configuration import ImageConfig, SerializationSettings

from flytekitplugins.horovod import Horovod, HorovodJob, MPIJob, Worker
from horovod_flyte_runtime.settings import whole_number

SETTINGS = SerializationSettings(image_config=ImageConfig.auto_default_image(), project="p", domain="d", version="v")


def _body() -> int:
    return 1


def _horovodrun_args(config: HorovodJob, monkeypatch) -> list:
    """The task's horovodrun command, as horovodrun's own parser reads it."""
    from horovod.runner.launch import parse_args

    command = task(task_config=config)(_body).get_command(SETTINGS)
    words = command[command.index("horovodrun"):command.index("pyflyte-execute")]
    assert words.count("--log-level") <= 1 and words.count("--verbose") <= 1, words
    monkeypatch.setattr("sys.argv", [*words, "pyflyte-execute"])
    return parse_args()


@pytest.mark.parametrize("kwargs, log_level, verbose", [
    ({}, "INFO", False),  # kfmpi's default, as its command passes it
    ({"log_level": "debug", "verbose": True}, "DEBUG", True),  # kfmpi's fields
    ({"horovod": Horovod(log_level="error", verbose=True)}, "ERROR", True),  # the settings
    ({"log_level": "DEBUG", "horovod": Horovod(log_level="ERROR")}, "ERROR", False),  # the settings win
], ids=["defaults", "kfmpi-fields", "settings", "both"])
def test_horovodjob_passes_its_log_level_and_verbose_once_from_its_settings(kwargs, log_level, verbose, monkeypatch):
    config = HorovodJob(worker=Worker(replicas=2), **kwargs)
    assert (config.horovod.log_level, config.horovod.verbose) == (config.log_level, config.verbose) == (log_level,
                                                                                                        verbose)
    assert config.horovod.env()["HOROVOD_LOG_LEVEL"] == log_level  # what a local run's ranks get
    args = _horovodrun_args(config, monkeypatch)
    assert (args.log_level, args.verbose) == (log_level, verbose)


def test_settings_shared_by_two_jobs_are_not_changed_by_either():
    shared = Horovod()
    HorovodJob(worker=Worker(replicas=2), log_level="DEBUG", verbose=True, horovod=shared)
    assert (shared.log_level, shared.verbose) == (None, False)


@pytest.mark.parametrize("value, at_least, whole", [
    (2, 1, True), (1, 1, True), (0, 1, False), (-2, None, True), (2.0, 1, False), (2.5, None, False),
    (True, None, False), ("2", None, False), (None, None, False),
])
def test_one_whole_number_check_for_every_count(value, at_least, whole):
    assert whole_number(value, at_least) is whole


def test_fill_job_defaults_sets_one_launcher_replica():
    assert MPIJob(worker=Worker(replicas=2)).launcher.replicas == 1
    assert HorovodJob(worker=Worker(replicas=2)).launcher.replicas == 1
