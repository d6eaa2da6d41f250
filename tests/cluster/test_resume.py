"""Retries that resume, run the way propeller runs them: the registered ``train_mpi`` task of
``workflows/rossmann.py`` through the MPI operator's launcher command (real ``horovodrun -np 2 --gloo``, the
task's controller), and its ``train`` task through the Spark driver entrypoint (``spark-submit``). Attempt 1 loses
rank 1 (SIGKILL, as the OOM killer does it) after its epoch-2 checkpoint reached the task's checkpoint prefix;
the lost rank makes the error recoverable, so Flyte retries: attempt 2 runs with ``--prev-checkpoint`` set to
attempt 1's checkpoint prefix, starts after the epoch attempt 1 saved last, and ends where an uninterrupted run
ends."""

import contextlib
import json
import os
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
from flyteidl.core import errors_pb2

from tests.cluster.backend import Attempt, mpi_launcher, spark_driver, value
from tests.rossmann._fixtures import make_prepared

EPOCHS = 5
# learning_rate: the rate the 2% bound below was set at; at the default 6e-3 a resumed Keras run ended 5.6% off (once)
HP = {"epochs": EPOCHS, "batch_size": 128, "hidden": [32, 16], "learning_rate": 2e-3}
TASK_HP = {"train_mpi": {}, "train_torch": {"batch_size": 32}}  # PyTorch's epochs are ~4x faster: more steps each

# a killed rank is named by timing (its echo first, its cause within SETTLE_S): make test runs these alone
pytestmark = pytest.mark.serial


def _inputs(template, attempt: Attempt, prepared: Path, **hp) -> None:
    from flytekit.types.directory import FlyteDirectory

    from workflows.rossmann import Hyperparameters

    attempt.write_inputs(template, {"prepared": FlyteDirectory(str(prepared)), "hp": Hyperparameters(**{**HP, **hp})})


def _epochs_saved(attempt: Attempt) -> int:
    state = attempt.checkpoint_prefix / "current" / "state.json"
    try:
        return json.loads(state.read_text())["epochs_done"]
    except (OSError, ValueError):
        return 0


def _rank_process(attempt: Attempt, rank: int) -> psutil.Process:
    """The ``pyflyte-execute`` process of ``rank`` in this attempt (its command names the attempt's output prefix)."""
    seen = []
    for proc in psutil.process_iter():
        try:
            command, env = " ".join(proc.cmdline()), proc.environ()
        except psutil.Error:
            continue
        if "pyflyte-execute" in command and str(attempt.output_prefix) in command:
            launched = env.get("HOROVOD_RANK", env.get("OMPI_COMM_WORLD_RANK"))  # horovodrun's, or mpirun's
            seen.append((proc.pid, launched))
            if launched == str(rank):
                return proc
    raise AssertionError(f"no rank {rank} process of {attempt.output_prefix} found; seen (pid, rank): {seen}")


def _lost_attempt(attempt: Attempt, ran) -> tuple:
    """Attempt 1 after its lost rank: epochs it saved (2 or more, not all), and its error, recoverable, no outputs."""
    saved = _epochs_saved(attempt)
    assert 2 <= saved < EPOCHS, saved
    assert "outputs.pb" not in os.listdir(attempt.output_prefix), ran.output[-3000:]
    assert "error.pb" in os.listdir(attempt.output_prefix), (ran.returncode, ran.output[-5000:])
    error = errors_pb2.ErrorDocument.FromString((attempt.output_prefix / "error.pb").read_bytes()).error
    assert error.kind == errors_pb2.ContainerError.RECOVERABLE, error.message[-2000:]  # so Flyte retries
    return saved, error


def _model(attempt: Attempt) -> dict:
    model = Path(value(attempt.outputs()["o0"]))
    return {name: json.loads((model / name).read_text()) for name in ("metrics.json", "history.json")}


@pytest.mark.parametrize("task", ["train_mpi", "train_torch"])  # the Keras and the PyTorch model
def test_a_retry_after_a_lost_rank_resumes_from_the_previous_attempts_checkpoint(rossmann, tmp_path, task):
    template = rossmann.task(f"workflows.rossmann.{task}")
    prepared = make_prepared(tmp_path / "prepared")

    first = Attempt(tmp_path / "attempt-1", execution_id="resume0001", attempt=0)
    _inputs(template, first, prepared, **TASK_HP[task])
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(mpi_launcher, template, first, tmp_path, timeout=300)
        deadline = time.monotonic() + 240
        rank1 = None
        while _epochs_saved(first) < 2:
            assert not job.done(), f"attempt 1 ended before its epoch-2 checkpoint:\n{job.result().output[-3000:]}"
            assert time.monotonic() < deadline, "no epoch-2 checkpoint in the task's checkpoint prefix"
            if rank1 is None and _epochs_saved(first) >= 1:  # found ahead, so the kill follows epoch 2 at once
                rank1 = _rank_process(first, 1)
            time.sleep(0.05)
        (rank1 or _rank_process(first, 1)).send_signal(signal.SIGKILL)
        ran = job.result()
    saved, error = _lost_attempt(first, ran)
    # horovodrun stops rank 0 when rank 1 dies and exits non-zero naming rank 1; the launcher writes the task's error
    assert "RankLostError" in error.message and "Horovod rank 1 died on host localhost" in error.message, \
        error.message[-2000:]
    assert ran.returncode == 0, ran.output[-3000:]  # the launcher owns the error, as pyflyte-execute does

    retry = Attempt(tmp_path / "attempt-2", execution_id="resume0001", attempt=1,
                    prev_checkpoint=first.checkpoint_prefix)
    _inputs(template, retry, prepared, **TASK_HP[task])
    ran = mpi_launcher(template, retry, tmp_path, timeout=300)
    assert ran.returncode == 0 and "error.pb" not in os.listdir(retry.output_prefix), ran.output[-4000:]
    assert f"resuming after epoch {saved} of {EPOCHS}" in ran.output, ran.output[-4000:]
    epochs_run = [line for line in ran.output.splitlines() if "rank 0: epoch" in line]
    assert len(epochs_run) == EPOCHS - saved, epochs_run  # only the epochs attempt 1 had not finished
    resumed = _model(retry)
    assert len(resumed["history.json"]["val_loss"]) == resumed["metrics.json"]["epochs"] == EPOCHS

    whole = Attempt(tmp_path / "uninterrupted", execution_id="resume0002")
    _inputs(template, whole, prepared, **TASK_HP[task])
    ran = mpi_launcher(template, whole, tmp_path, timeout=300)
    assert ran.returncode == 0, ran.output[-4000:]
    uninterrupted = _model(whole)
    final = resumed["history.json"]["val_loss"][-1], uninterrupted["history.json"]["val_loss"][-1]
    assert abs(final[0] / final[1] - 1) <= 0.02, final
    if task == "train_torch":  # seeded per rank and epoch, with the optimizer's state restored: the same run exactly
        assert resumed["history.json"] == uninterrupted["history.json"]


def _spark_rank(rank: int, since: float) -> psutil.Process:
    """Rank ``rank`` of the Spark-route job started after ``since``: the one process with Horovod's ``HOROVOD_RANK``
    that began then (Horovod's task service may leave it without the parent that ties it to the driver)."""
    # a Python process: what a rank starts (e.g. ctypes' find_library running ldconfig) inherits HOROVOD_RANK too
    found = [p for p, r, started in _horovod_ranks() if r == str(rank) and started >= since and _is_python(p)]
    assert len(found) == 1, f"rank {rank} processes started since the attempt began: {found}"
    return found[0]


def _alive(proc: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    return False


def _is_python(proc: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return "python" in os.path.basename(proc.exe())
    return False


def _horovod_ranks() -> list:
    """(process, its HOROVOD_RANK, when it started) of every running Horovod rank."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            rank = proc.environ().get("HOROVOD_RANK")
            if rank is not None:
                found.append((proc, rank, proc.create_time()))
    return found


SPARK_HP = {"batch_size": 16}  # more steps per epoch than the MPI test: the test finds rank 1 before killing it


def test_a_spark_route_retry_after_a_lost_rank_resumes_from_the_previous_attempts_checkpoint(rossmann, tmp_path):
    template = rossmann.task("workflows.rossmann.train")
    prepared = make_prepared(tmp_path / "prepared")

    first = Attempt(tmp_path / "attempt-1", execution_id="resume0003", attempt=0)
    _inputs(template, first, prepared, **SPARK_HP)
    since = time.time()
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(spark_driver, template, first, tmp_path, timeout=400)
        deadline = time.monotonic() + 300
        rank_1 = None
        while _epochs_saved(first) < 2:
            assert not job.done(), f"attempt 1 ended before its epoch-2 checkpoint:\n{job.result().output[-3000:]}"
            assert time.monotonic() < deadline, "no epoch-2 checkpoint in the task's checkpoint prefix"
            if rank_1 is None or not _alive(rank_1):  # found early: looking through every process takes a while
                with contextlib.suppress(AssertionError):
                    rank_1 = _spark_rank(1, since)
            time.sleep(0.05)
        if rank_1 is None or not _alive(rank_1):  # ranks of an earlier, shorter Horovod job of the task had ended
            rank_1 = _spark_rank(1, since)
        rank_1.send_signal(signal.SIGKILL)
        ran = job.result()
    saved, error = _lost_attempt(first, ran)
    assert "RankLostError" in error.message and re.search(r"Horovod rank 1 died on host \S+", error.message), \
        error.message[-2000:]

    retry = Attempt(tmp_path / "attempt-2", execution_id="resume0003", attempt=1,
                    prev_checkpoint=first.checkpoint_prefix)
    _inputs(template, retry, prepared, **SPARK_HP)
    ran = spark_driver(template, retry, tmp_path, timeout=400)
    assert ran.returncode == 0 and "error.pb" not in os.listdir(retry.output_prefix), ran.output[-4000:]
    assert f"resuming after epoch {saved} of {EPOCHS}" in ran.output, ran.output[-4000:]
    epochs_run = [line for line in ran.output.splitlines() if "rank 0: epoch" in line]
    assert [line.split("rank 0: epoch ")[1].split("/")[0] for line in epochs_run] == \
        [str(e) for e in range(saved + 1, EPOCHS + 1)], epochs_run  # only the epochs attempt 1 had not finished
    resumed = _model(retry)["history.json"]
    assert len(resumed["val_loss"]) == _model(retry)["metrics.json"]["epochs"] == EPOCHS
    # the retry went on from attempt 1's weights and optimizer state: its first epoch's loss continues attempt 1's
    # curve (a fresh start has several times that loss after one epoch)
    before = json.loads((first.checkpoint_prefix / "current" / "state.json").read_text())["history"]["loss"]
    assert resumed["loss"][:saved] == before[:saved]
    assert resumed["loss"][saved] <= 1.1 * before[saved - 1], (before, resumed["loss"])

    # the end, against an uninterrupted run. The Estimator's runs are not repeatable (petastorm's reader threads,
    # Spark's partitions, the retry's seed): in 4 runs of this test, its 12 trainings (resumed and uninterrupted alike)
    # ended with backtest val_loss 0.065..0.150, too wide for a bound between single runs (1.3x failed once in CI, at
    # 0.143), and with training loss 0.173..0.222 (log sd 0.089, so the log of the ratio of two runs has sd 0.126). So
    # the retry must run exactly the uninterrupted learning rates, and end its training loss within 1.55x of the
    # uninterrupted run's (3.5 sd: fails about 2 in 10,000 by chance; one run, not the two this took before, saves a
    # Spark-route training of the serial tests' minutes).
    whole = Attempt(tmp_path / "uninterrupted", execution_id="resume0004")
    _inputs(template, whole, prepared, **SPARK_HP)
    ran = spark_driver(template, whole, tmp_path, timeout=400)
    assert ran.returncode == 0, ran.output[-4000:]
    uninterrupted = _model(whole)["history.json"]
    assert resumed["lr"] == pytest.approx(uninterrupted["lr"], rel=1e-6), (resumed["lr"], uninterrupted["lr"])
    assert resumed["loss"][saved] < 0.5 * uninterrupted["loss"][0]
    assert resumed["loss"][-1] <= 1.55 * uninterrupted["loss"][-1], (resumed["loss"][-1], uninterrupted["loss"][-1])
