"""The MPIJob task's local launch as it was before the launch-overhead work (``horovod.runner.run``), kept
here only so bench/launch.py can show the before/after on the same machine in the same run."""

import contextlib
import os
import shutil
import tempfile

from flytekitplugins.horovod import mpi
from horovod_flyte_runtime.failures import RankFailures
from horovod_flyte_runtime.rank import RankJob, import_path, run_rank
from horovod_flyte_runtime.settings import Horovod


def run_local_before(fn, kwargs=None, num_proc=2, settings=None, flyte=None, all_ranks=False):
    """The previous local launcher: ``horovod.runner.run(run_rank, ...)`` with the same job."""
    import horovod.runner

    settings = settings or Horovod()
    failure_dir = tempfile.mkdtemp(prefix="horovod-failures-")
    job = RankJob.of(fn, kwargs, failure_dir, settings, flyte=flyte, all_ranks=all_ranks)
    env = {**settings.env(), "PYTHONUNBUFFERED": "1", "PYTHONPATH": import_path(fn)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return horovod.runner.run(run_rank, args=(job,), num_proc=num_proc, hosts=f"localhost:{num_proc}",
                                  start_timeout=settings.start_timeout, use_gloo=settings.controller == "gloo",
                                  use_mpi=settings.controller == "mpi",
                                  mpi_args="--allow-run-as-root --oversubscribe" if settings.controller == "mpi"
                                  else None, disable_cache=True)
    except Exception as exc:
        raise RankFailures(failure_dir).error(exc) from None
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        shutil.rmtree(failure_dir, ignore_errors=True)


@contextlib.contextmanager
def previous_launcher():
    """MPIJob tasks called inside this block launch their ranks the previous way."""
    current = mpi.run_local
    mpi.run_local = run_local_before
    try:
        yield
    finally:
        mpi.run_local = current
