"""Failure classification, fed output recorded from real runs: what mpirun, horovodrun (Gloo), horovod.spark and the
ranks printed or recorded when rank 1 raised, exited, was killed (SIGKILL, SIGTERM), froze, or filled the disk. Each
case asserts the task's error class, the rank and host it names, and the failure's kind. No rank is started.

Recorded on one host (``vm``, 192.0.2.2) with Open MPI 4.1.4 and Horovod 0.28.1: two ranks whose rank 1 failed after
an allreduce (``run_local`` for Gloo and mpirun, ``HorovodRunner(np=2)`` for Spark's barrier stage, ``horovodrun
--gloo -np 2`` and ``mpirun`` with the local launcher's flags around a plain Python program); record texts trimmed.
"""

import pytest
from flytekit.exceptions.user import FlyteRecoverableException

from flytekitplugins.horovod.disk_full import DiskFullError, disk_full_error
from flytekitplugins.horovod.errors import (
    InterruptedByUser,
    LauncherStopped,
    RankFailedError,
    RankLostError,
    lost_in_horovod_launcher,
)
from horovod_flyte_runtime import classify
from horovod_flyte_runtime.classify import DIED, ECHO, LOST, RAISED, RECOVERABLE_RAISED
from horovod_flyte_runtime.cluster_launcher import launcher_failure
from horovod_flyte_runtime.failures import RankFailures, this_host
from horovod_flyte_runtime.local_launcher import interrupted, record_mpirun_failure
from horovod_flyte_runtime.processes import Processes
from horovod_flyte_runtime.rank_output import RankOutput

HOST = "vm (192.0.2.2)"
SHUT_DOWN = ("Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to "
             "allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If the shutdown "
             "was caused by an exception, you should see the exception in the log before the first shutdown message.")
# rank 0's record whenever rank 1 failed first (its last lines)
ECHO_RECORD = (0, ECHO, '  File ".../horovod/torch/mpi_ops.py", line 1290, in synchronize\n'
                        "    raise HorovodInternalError(e)\n"
                        f"horovod.common.exceptions.HorovodInternalError: {SHUT_DOWN}\n")
RAISED_RECORD = (1, RAISED, 'Traceback (most recent call last):\n  File "/tmp/rec/record.py", line 22, in body\n'
                            '    if how == "raise": raise ValueError("rank one cannot go on")\n'
                            "ValueError: rank one cannot go on\n")
FULL_DISK_RECORD = (1, RAISED, 'Traceback (most recent call last):\n  File "/tmp/rec/record.py", line 29, in body\n'
                               '    open(os.path.join(full_dir, f"checkpoint-{i}.h5"), "w").close()\n'
                               "OSError: [Errno 28] No space left on device: '/tmp/rec/fullfs/checkpoint-3.h5'\n")
FROZEN_RECORD = (1, LOST, f"rank 0 on {HOST} heard nothing from rank 1 on {HOST} for 3 s: its host, its network link "
                          "or its process stopped")


def _mpirun(closing: str) -> str:
    """mpirun's output (with the local launcher's flags) after rank 1 failed: ``closing`` is its last message."""
    return ("[1,0]<stdout>:rank 0 up\n[1,1]<stdout>:rank 1 up[1,1]<stdout>:\n" + "-" * 74 + "\n"
            "Primary job  terminated normally, but 1 process returned\n"
            "a non-zero exit code. Per user-direction, the job has been aborted.\n" + "-" * 74 + "\n" + "-" * 74 + "\n"
            f"{closing}\n" + "-" * 74 + "\n")


MPIRUN_KILL = _mpirun("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).")
MPIRUN_TERM = _mpirun("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 15 (Terminated).")
MPIRUN_EXIT = _mpirun("mpirun detected that one or more processes exited with non-zero status, thus causing\n"
                      "the job to be terminated. The first process to do so was:\n\n"
                      "  Process name: [[31141,1],1]\n  Exit code:    3")
MPIRUN_RAISE = MPIRUN_EXIT.replace("Exit code:    3", "Exit code:    1")


# horovodrun's and horovod.spark.run's error after rank 1 ended with ``code`` (137 and 143 from horovod.spark.run for
# SIGKILL and SIGTERM, as recorded)
HOROVOD_FAILED = ("Horovod detected that one or more processes exited with non-zero status, thus causing the job to be "
                  "terminated. The first process to do so was:\nProcess name: 1\nExit code: {code}\n")


def _horovodrun(code: int) -> str:
    """horovodrun's output after rank 1 ended with ``code``."""
    return ("[0]<stdout>:rank 0 up\n[1]<stdout>:rank 1 up\n" + ("[1]<stderr>:Killed\n" if code == 137 else "")
            + f"Process 1 exit with status code {code}.\nTerminating remaining workers after failure of Process 1.\n"
            "[0]<stderr>:Terminated\nProcess 0 exit with status code 143.\nTraceback (most recent call last):\n"
            '  File ".../horovod/runner/gloo_run.py", line 284, in launch_gloo\n'
            "    raise RuntimeError('Horovod detected that one or more processes exited with non-zero '\n"
            f"RuntimeError: {HOROVOD_FAILED.format(code=code)}\n")


def _task_error(tmp_path, *records, launcher_error=RuntimeError("the launcher failed")):
    """The task's error from these (rank, kind, text) records, written in this order on ``HOST``."""
    failures = RankFailures(str(tmp_path / "failures"))
    for rank, kind, text in records:
        failures.record(rank, kind, text, host=HOST)
    return failures.error(launcher_error), failures.failures()[0].kind


def _assert(error, cls, rank, host, kind, got_kind):
    assert (type(error), error.rank, error.host, got_kind) == (cls, rank, host, kind), str(error)


@pytest.mark.parametrize("exc, kind", [
    (ValueError("rank one cannot go on"), RAISED),
    (OSError(28, "No space left on device", "/tmp/rec/fullfs/checkpoint-3.h5"), RAISED),
    (KeyboardInterrupt(), RAISED),
    (RuntimeError(SHUT_DOWN), ECHO),
    (RuntimeError("[.../gloo/transport/tcp/pair.cc:589] Read error [127.0.0.1]:12721: Connection reset by peer"), ECHO),
    (LauncherStopped("rank 1 was stopped by its launcher (SIGTERM): another rank failed or was lost"), ECHO),
    (FlyteRecoverableException("the body asks for a retry"), RECOVERABLE_RAISED),
])
def test_what_a_rank_raised_gets_its_kind(exc, kind):
    assert classify.exception_kind(exc) == kind


def test_only_a_user_error_is_not_retried(tmp_path):
    """Every kind but RAISED is a RankLostError; an echo only when no rank recorded a cause of its own."""
    for kind in (RAISED, RECOVERABLE_RAISED, DIED, LOST, ECHO):
        error, _ = _task_error(tmp_path / kind, (1, kind, "text"))
        assert isinstance(error, RankFailedError if kind == RAISED else RankLostError), kind
    error, first = _task_error(tmp_path / "echoes", ECHO_RECORD, (1, ECHO, SHUT_DOWN))
    _assert(error, RankLostError, 0, HOST, ECHO, first)
    assert "no rank reported a cause of its own" in str(error)


@pytest.mark.parametrize("route, records, cls, kind", [
    ("gloo raise", [RAISED_RECORD, ECHO_RECORD], RankFailedError, RAISED),
    ("gloo exit", [(1, DIED, "rank 1 exited with status 3"), ECHO_RECORD], RankLostError, DIED),
    ("gloo kill", [(1, DIED, "rank 1 was killed by SIGKILL"), ECHO_RECORD], RankLostError, DIED),
    ("gloo term", [(1, DIED, "rank 1 was killed by SIGTERM"), ECHO_RECORD], RankLostError, DIED),
    ("gloo freeze", [FROZEN_RECORD, (0, DIED, "rank 0 exited with status 1; its last output:\n...")], RankLostError,
     LOST),
    ("gloo full disk", [FULL_DISK_RECORD, ECHO_RECORD], RankFailedError, RAISED),
    ("mpirun freeze", [FROZEN_RECORD, (0, DIED, "rank 0 exited with status 1 without raising an exception (reported "
                                                "by mpirun)")], RankLostError, LOST),
    ("spark barrier kill", [(1, DIED, "rank 1 was killed by SIGKILL"), ECHO_RECORD], RankLostError, DIED),
    ("spark barrier raise", [RAISED_RECORD, ECHO_RECORD], RankFailedError, RAISED),
    ("echo recorded first", [ECHO_RECORD, (1, DIED, "rank 1 was killed by SIGKILL")], RankLostError, DIED),
])
def test_the_rank_that_failed_first_is_named_not_its_echo(tmp_path, route, records, cls, kind):
    error, first = _task_error(tmp_path, *records)
    _assert(error, cls, 1, HOST, kind, first)
    assert str(error).startswith(classify.headline(kind, 1, HOST))
    assert "rank 0 on vm (192.0.2.2) failed after it, as a consequence" in str(error)


@pytest.mark.parametrize("output, own_record, cls, text", [
    (MPIRUN_KILL, None, RankLostError, "rank 1 on node vm was killed by SIGKILL (reported by mpirun)"),
    (MPIRUN_TERM, None, RankLostError, "rank 1 on node vm was killed by SIGTERM (reported by mpirun)"),
    (MPIRUN_EXIT, None, RankLostError, "rank 1 exited with status 3 without raising an exception (reported by mpirun)"),
    (MPIRUN_RAISE, RAISED_RECORD, RankFailedError, "ValueError: rank one cannot go on"),
], ids=["kill", "term", "exit", "raise"])
def test_mpiruns_closing_message_names_the_rank(tmp_path, output, own_record, cls, text):
    """The local launcher records the rank mpirun names, on this host, with that rank's last lines (the rank's
    output as the launch's ``RankOutput`` got it), unless the rank recorded why itself."""
    failures = RankFailures(str(tmp_path / "failures"))
    if own_record is not None:
        failures.record(*own_record, host=HOST)
    rank_output = RankOutput(str(tmp_path / "ranks.log"), verbose=False)
    rank_output.write(output)
    record_mpirun_failure(output, failures, rank_output.last_lines)
    error = failures.error(RuntimeError(f"mpirun exited with status 137; its last output:\n{output}"))
    host = HOST if own_record else this_host()
    _assert(error, cls, 1, host, RAISED if own_record else DIED, failures.failures()[0].kind)
    assert text in str(error)
    assert ("its last output:\nrank 1 up" in str(error)) == (own_record is None), str(error)
    assert "rank 0 up" not in str(error)


@pytest.mark.parametrize("output, cls, kind, text", [
    (_horovodrun(137), RankLostError, DIED, "rank 1 was killed by SIGKILL (exit code 137), reported by horovodrun"),
    (_horovodrun(3), RankLostError, DIED, "rank 1 exited with status 3, reported by horovodrun"),
    # a lost host: horovodrun reports ssh's 255 (the recorded 137, changed; tests/multihost runs the real one)
    (_horovodrun(255), RankLostError, DIED, "rank 1 exited with status 255 (horovodrun ran it over ssh"),
    (MPIRUN_KILL, RankLostError, DIED, "rank 1 on node vm was killed by SIGKILL (reported by mpirun)"),
    ("ORTE has lost communication with a remote daemon.\n", RankLostError, None,
     "Horovod job failed before any rank reported an error: mpirun exited with status 1"),
], ids=["horovodrun-kill", "horovodrun-exit", "horovodrun-ssh-lost-host", "mpirun-kill", "unnamed"])
def test_the_cluster_launcher_names_the_rank_and_its_host_from_the_hostfile(tmp_path, output, cls, kind, text):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("worker-0 slots=1\nworker-1 slots=1\n")
    launcher = "horovodrun" if "Process name: 1" in output else "mpirun"
    command = [launcher, "-np", "2", "pyflyte-execute", "--raw-output-data-prefix", str(tmp_path / "raw")]
    error = launcher_failure(command, {"OMPI_MCA_orte_default_hostfile": str(hostfile)}, output, 1)
    failures = RankFailures(str(tmp_path / "raw" / "horovod-failures")).failures()
    assert (type(error), error.rank, error.host) == (cls, 1 if kind else None, "worker-1" if kind else None)
    assert [f.kind for f in failures] == ([kind] if kind else [])
    assert text in str(error)


@pytest.mark.parametrize("code, signal_name", [(137, "SIGKILL"), (143, "SIGTERM"), (-9, "SIGKILL")])
def test_a_rank_killed_under_horovod_spark_is_lost_and_a_raise_is_not(code, signal_name):
    """horovod.spark.run (so the Estimator's SparkBackend) reports a rank's exit code: 128+N from a shell, -N."""
    error = lost_in_horovod_launcher(RuntimeError(HOROVOD_FAILED.format(code=code)))
    assert (type(error), error.rank, error.host) == (RankLostError, 1, None)
    assert f"Horovod rank 1 was killed by {signal_name} (exit code {code}) in its Spark task" in str(error)
    assert "runs out of memory" in str(error)  # the OOM killer's SIGKILL looks the same
    assert lost_in_horovod_launcher(RuntimeError(HOROVOD_FAILED.format(code=1))) is None  # a rank that raised


@pytest.mark.parametrize("code, signal_number", [(-9, 9), (137, 9), (143, 15), (1, None), (3, None), (255, None)])
def test_horovods_exit_codes_give_the_signal_from_minus_n_or_128_plus_n_up_to_64(code, signal_number):
    assert classify.horovod_launcher_exit(_horovodrun(code)) == ("1", code, signal_number)


@pytest.mark.parametrize("line, rank", [
    ("[1]<stderr>:OSError: [Errno 28] No space left on device: '/tmp/rec/fullfs/checkpoint-3.h5'", 1),
    ("[1,1]<stderr>:OSError: [Errno 28] No space left on device: '/tmp/rec/fullfs/checkpoint-3.h5'", 1),
])
def test_a_rank_that_filled_the_disk_is_named_with_the_path(line, rank):
    """The Spark route turns a rank's line naming a full disk into a recoverable DiskFullError."""
    error = disk_full_error(RuntimeError(HOROVOD_FAILED.format(code=1)), line, classify.rank_of(line))
    assert isinstance(error, DiskFullError)
    assert str(error).startswith("No space left on device: /tmp/rec/fullfs/checkpoint-3.h5 (written by Horovod rank 1)")
    assert classify.rank_of("Process 1 exit with status code 1.") is None  # the launcher's own line


@pytest.mark.parametrize("error_class", [RankFailedError, RankLostError])
def test_a_rank_failure_whose_record_names_a_full_disk_is_that_ranks_full_disk(error_class):
    """A rank's failure record (the Spark barrier ranks': the driver never saw their output) naming a full disk."""
    record = ("Horovod rank 1 failed on host vm: OSError: [Errno 28] No space left on device: "
              "'/tmp/rec/fullfs/checkpoint-3.h5'\nTraceback (most recent call last):\n  ...")
    error = disk_full_error(error_class(record, rank=1, host="vm"))
    assert isinstance(error, DiskFullError)
    assert str(error).startswith("No space left on device: /tmp/rec/fullfs/checkpoint-3.h5 (written by Horovod rank 1)")
    assert disk_full_error(error_class("Horovod rank 1 failed on host vm: ValueError: bad", rank=1)) is None


@pytest.mark.parametrize("marker", classify.ECHO_MARKERS)
def test_every_echo_marker_makes_an_echo(marker):
    assert classify.exception_kind(RuntimeError(f"... {marker} ...")) == ECHO


@pytest.mark.parametrize("text, path", [
    # recorded: Python's open() on a full tmpfs, TensorFlow's tf.io.write_file on one (64 KB)
    ("OSError: [Errno 28] No space left on device: '/tmp/rec/fullfs/checkpoint-3.h5'",
     "/tmp/rec/fullfs/checkpoint-3.h5"),
    ("ResourceExhaustedError: {{function_node __wrapped__WriteFile_device_/job:localhost/replica:0/task:0/device:CPU:0"
     "}} /tmp/rec/tffull/weights.bin; No space left on device [Op:WriteFile]", "/tmp/rec/tffull/weights.bin"),
    # Spark's Parquet writer names the file in its first line and the full disk far below
    ("org.apache.spark.SparkException: Task failed while writing rows to file:/data/prepared/part-00000.parquet.\n"
     "Caused by: java.io.IOException: No space left on device", "/data/prepared/part-00000.parquet"),
    ("OSError: [Errno 28] No space left on device", "(path not given)"),
], ids=["python", "tensorflow", "spark", "no-path"])
def test_a_full_disks_path_is_found_in_each_frameworks_words(text, path):
    assert classify.no_space_path(text) == path


def test_ctrl_c_is_the_users_not_a_failure():
    error = interrupted(Processes())
    assert isinstance(error, InterruptedByUser) and not isinstance(error, FlyteRecoverableException)
    assert str(error) == "interrupted by the user (Ctrl-C): stopped the Horovod job before it started"


@pytest.mark.parametrize("code, said", [(-9, "was killed by SIGKILL"), (-99, "was killed by signal 99"),
                                        (3, "exited with status 3")])
def test_exit_statuses_read_as_a_person_says_them(code, said):
    assert classify.describe_status(code) == said
