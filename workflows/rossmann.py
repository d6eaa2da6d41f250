"""Rossmann store-sales forecasting as Flyte tasks: data -> Spark prep -> Horovod training -> prediction.

    pyflyte run workflows/rossmann.py wf                       # synthetic data, Horovod on Spark
    pyflyte run workflows/rossmann.py wf_mpi                   # the same, trained by MPIJob ranks
    pyflyte run workflows/rossmann.py wf_torch                 # the same model in PyTorch, on MPIJob ranks
    pyflyte run workflows/rossmann.py wf --data_dir ./kaggle   # the seven real CSV files
    pyflyte run workflows/rossmann.py wf --hp '{"epochs": 8, "n_stores": 200}'

Every task returns a directory (FlyteDirectory); the logic lives in the ``rossmann`` library.
"""

import contextlib
import dataclasses
import functools
import json
import logging
import os
import time
import typing

import click
import flytekit
from flytekit import Resources, task, workflow
from flytekit.types.directory import FlyteDirectory
from flytekitplugins.spark import Spark

from flytekitplugins.horovod import (
    Horovod,
    HorovodSpark,
    MPIJob,
    Worker,
    compression,
    current_horovod_spark,
    names_a_full_disk,
    spark_backend,
    spark_checkpoint_url,
    spark_store,
)
from horovod_flyte_runtime.noise import quiet_this_process
from horovod_flyte_runtime.rank_start import launched_rank
from rossmann import hyperparameters
from rossmann.spark_conf import SPARK_CONF

log = logging.getLogger("workflows.rossmann")

RANKS = 2  # Horovod ranks of both training tasks (pods are sized before a task body runs)
WHERE_RANKS_ARE_SET = (f"the rank count is the training tasks' config: RANKS = {RANKS} in workflows/rossmann.py "
                       "(HorovodSpark(num_proc=RANKS) for train, MPIJob(worker=Worker(replicas=RANKS)) for train_mpi "
                       "and train_torch)")


@dataclasses.dataclass
class Hyperparameters(hyperparameters.Hyperparameters):
    """Training and data knobs, checked when the workflow starts (``rossmann.hyperparameters.Hyperparameters``, which
    Flyte 2's ``workflows/rossmann_flyte2.py`` takes too), read from ``pyflyte run ... --hp '{...}'``."""

    @classmethod
    def from_json(cls, text: str) -> "Hyperparameters":
        """What ``pyflyte run ... --hp '{...}'`` builds the value with: an unknown or bad key is a usage error."""
        try:
            given = json.loads(text)
            hyperparameters.check_names(given, [f.name for f in dataclasses.fields(cls)], {"ranks": WHERE_RANKS_ARE_SET})
            return cls(**given)
        except hyperparameters.HyperparameterError as err:
            raise click.BadParameter(str(err)) from None


def _workdir(name: str) -> str:
    path = os.path.join(flytekit.current_context().working_directory, name)
    os.makedirs(path, exist_ok=True)
    return path


def timed(fn: typing.Callable) -> typing.Callable:
    """A task body that first silences the known noise of this stack (the plugin's ``quiet_this_process``, as its
    Horovod tasks do; ``FLYTE_HOROVOD_VERBOSE=1`` shows it), then prints one line when it starts
    and one when it ends, with its duration (where the body runs on every rank, rank 0 alone prints)."""

    @functools.wraps(fn)
    def body(*args, **kwargs):
        quiet_this_process()
        say = functools.partial(print, flush=True) if _speaks() else (lambda *_: None)
        say(f"[{fn.__name__}] started")
        started = time.monotonic()
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            say(f"[{fn.__name__}] failed after {time.monotonic() - started:.1f} s")
            raise
        say(f"[{fn.__name__}] done in {time.monotonic() - started:.1f} s")
        return result

    return body


def _speaks() -> bool:
    """Whether this process prints the task's timings: rank 0 where the body runs on every rank."""
    return (launched_rank() or 0) == 0


@contextlib.contextmanager
def phase(task_name: str, what: str) -> typing.Iterator[None]:
    """One line with the seconds a step of a task took (the phases of docs/performance.md)."""
    started = time.monotonic()
    yield
    if _speaks():
        print(f"[{task_name}] {what}: {time.monotonic() - started:.1f} s", flush=True)


@task(cache=False)
@timed
@names_a_full_disk
def get_data(data_dir: typing.Optional[FlyteDirectory], hp: Hyperparameters) -> FlyteDirectory:
    """The seven input CSV files: the given directory, or synthetic ones with a known noise floor."""
    from rossmann import report as rreport
    from rossmann import synthetic

    if data_dir is not None:
        return data_dir
    out = _workdir("data")
    report = synthetic.generate(out, n_stores=hp.n_stores, start=hp.start, end=hp.end, seed=hp.seed)
    rreport.save_synthetic_report(report, out)
    log.info("synthetic data: %d stores, %d train rows, noise floor RMSPE %.4f", report.n_stores,
             report.train_rows, report.test_noise_floor_rmspe)
    return FlyteDirectory(out)


@task(task_config=Spark(spark_conf=SPARK_CONF), requests=Resources(cpu="2", mem="6Gi"))
@timed
@names_a_full_disk
def prepare(data: FlyteDirectory, hp: Hyperparameters) -> FlyteDirectory:
    """Validate and load the CSV files, engineer features on Spark, write Parquet + metadata.json."""
    from rossmann import data as rdata
    from rossmann import features, report

    spark = flytekit.current_context().spark_session
    source = data.download()
    raw = rdata.load(spark, source)  # a clear RossmannDataError, naming file and column, before any work
    out = os.path.join(flytekit.current_context().working_directory, "prepared")
    features.prepare(spark, raw, out, sample_rate=hp.sample_rate, seed=hp.seed, min_row_groups=max(8, RANKS))
    report.carry_synthetic_files(source, out)
    return FlyteDirectory(out)


def _flyte_checkpoint() -> typing.Optional[flytekit.Checkpoint]:
    """The task's Flyte checkpoint, or None where the execution has none."""
    try:
        return flytekit.current_context().checkpoint
    except NotImplementedError:
        return None


def _report_training(model_dir: str, prepared_dir: str) -> None:
    """Score the model on the backtest and (synthetic data) the test period; the curves as a Deck; one line."""
    from rossmann import report
    from rossmann.model_dir import load_training_outputs
    from rossmann.predict import submission_from_dirs

    metrics = report.add_scores(model_dir, prepared_dir,
                                report.score_test(submission_from_dirs(prepared_dir, model_dir), prepared_dir))
    history, _ = load_training_outputs(model_dir)
    flytekit.Deck("Training curves", report.training_curves_html(history, metrics))
    print(report.summary(metrics), flush=True)


@task(task_config=HorovodSpark(num_proc=RANKS, spark_conf=SPARK_CONF), enable_deck=True,
      requests=Resources(cpu="2", mem="8Gi"))
@timed
def train(prepared: FlyteDirectory, hp: Hyperparameters) -> FlyteDirectory:
    """Horovod on Spark: KerasEstimator on the prepared Parquet, one rank per Spark task of ``num_proc``.

    Rank 0 copies a checkpoint to the task's Flyte checkpoint after every epoch; a retry (after a lost rank) starts
    from the previous attempt's and goes on after its last epoch."""
    from rossmann.train import fit_estimator

    out, prepared_dir, resume_dir = _workdir("model"), prepared.download(), _workdir("checkpoint")
    checkpoint = _flyte_checkpoint()
    restored = checkpoint is not None and checkpoint.restore(resume_dir) is not None
    with phase("train", "Estimator fit (rank start, epochs, model return), calibration, saving the model"):
        fit_estimator(prepared_dir, spark_backend(), spark_store(), epochs=hp.epochs,
                      batch_size=hp.batch_size, learning_rate=hp.learning_rate, hidden=hp.hidden, seed=hp.seed,
                      compression=compression(), out_dir=out, resume_dir=resume_dir if restored else None,
                      checkpoint_url=spark_checkpoint_url(), scratch_dir=current_horovod_spark().scratch_dir())
    with phase("train", "test-period scores and Deck"):
        _report_training(out, prepared_dir)
    return FlyteDirectory(out)


def _train_on_ranks(task_name: str, train_rank: typing.Callable[..., typing.Any], prepared: FlyteDirectory,
                    hp: Hyperparameters) -> FlyteDirectory:
    """The MPI route's body on every rank, with the Keras or the PyTorch ``train_rank``: rank 0 restores the task's
    Flyte checkpoint (a previous attempt's), saves one after every epoch, and scores the model."""
    rank = launched_rank() or 0
    out, prepared_dir, checkpoint_dir = _workdir("model"), prepared.download(), _workdir("checkpoint")
    checkpoint = _flyte_checkpoint()
    if checkpoint is not None and rank == 0 and checkpoint.restore(checkpoint_dir) is not None:
        log.info("restored the previous attempt's checkpoint into %s", checkpoint_dir)
    with phase(task_name, "reading the shards, epochs, calibration, saving the model"):
        train_rank(prepared_dir, out, epochs=hp.epochs, batch_size=hp.batch_size,
                   learning_rate=hp.learning_rate, hidden=hp.hidden, seed=hp.seed, compression=compression(),
                   checkpoint_dir=checkpoint_dir, checkpoint_saved=checkpoint.save if checkpoint is not None else None)
    if rank == 0:
        with phase(task_name, "test-period scores and Deck"):
            _report_training(out, prepared_dir)
    return FlyteDirectory(out)


@task(task_config=MPIJob(worker=Worker(replicas=RANKS), horovod=Horovod(framework="tensorflow")), enable_deck=True,
      requests=Resources(cpu="2", mem="8Gi"))
@timed
def train_mpi(prepared: FlyteDirectory, hp: Hyperparameters) -> FlyteDirectory:
    """The MPI route: this body runs on every rank, where the plugin has already initialised ``horovod.tensorflow``;
    each rank reads its shard of the Parquet row groups.

    Rank 0 saves a checkpoint after every epoch to the task's Flyte checkpoint; a retry (Flyte's ``retries``, after
    a lost rank) starts from the previous attempt's and goes on after its last epoch."""
    from rossmann.train import train_rank

    return _train_on_ranks("train_mpi", train_rank, prepared, hp)


@task(task_config=MPIJob(worker=Worker(replicas=RANKS), horovod=Horovod(framework="pytorch")), enable_deck=True,
      requests=Resources(cpu="2", mem="4Gi"))
@timed
def train_torch(prepared: FlyteDirectory, hp: Hyperparameters) -> FlyteDirectory:
    """The PyTorch model on the MPI route: this body runs on every rank, where the plugin has already initialised
    ``horovod.torch``; each rank reads its shard of the Parquet row groups. Checkpoints and retries as ``train_mpi``."""
    from rossmann.torch_train import train_rank_torch

    return _train_on_ranks("train_torch", train_rank_torch, prepared, hp)


@task(requests=Resources(cpu="2", mem="4Gi"))
@timed
@names_a_full_disk
def predict(prepared: FlyteDirectory, model: FlyteDirectory) -> FlyteDirectory:
    """Vectorised prediction of the test split by a Keras or PyTorch model; ``submission.csv`` (Id,Sales) with closed
    stores at 0."""
    from rossmann import report
    from rossmann.predict import submission_from_dirs, write_submission

    prepared_dir, model_dir = prepared.download(), model.download()
    submission = submission_from_dirs(prepared_dir, model_dir)
    path = write_submission(submission, _workdir("predictions"))
    scores = report.score_test(submission, prepared_dir)
    if scores:
        print(f"submission.csv: test RMSPE {scores['test_rmspe']:.4f}, perfect model {scores['test_perfect_rmspe']:.4f} "
              f"on the same {scores['test_rows_scored']} rows", flush=True)
    log.info("submission: %s (%d rows); model: %s", path, len(submission), model_dir)
    return FlyteDirectory(os.path.dirname(path))


Outputs = typing.NamedTuple("Outputs", [("model", FlyteDirectory), ("predictions", FlyteDirectory)])


@workflow
def wf(data_dir: typing.Optional[FlyteDirectory] = None, hp: Hyperparameters = Hyperparameters()) -> Outputs:
    """Synthetic (or given) data -> Spark prep -> Horovod-on-Spark training -> submission.csv."""
    prepared = prepare(data=get_data(data_dir=data_dir, hp=hp), hp=hp)
    model = train(prepared=prepared, hp=hp)
    return Outputs(model=model, predictions=predict(prepared=prepared, model=model))


@workflow
def wf_mpi(data_dir: typing.Optional[FlyteDirectory] = None, hp: Hyperparameters = Hyperparameters()) -> Outputs:
    """The same pipeline, trained by MPIJob ranks (``mpirun``/``horovodrun`` on a cluster)."""
    prepared = prepare(data=get_data(data_dir=data_dir, hp=hp), hp=hp)
    model = train_mpi(prepared=prepared, hp=hp)
    return Outputs(model=model, predictions=predict(prepared=prepared, model=model))


@workflow
def wf_torch(data_dir: typing.Optional[FlyteDirectory] = None, hp: Hyperparameters = Hyperparameters()) -> Outputs:
    """The same pipeline with the model in PyTorch, trained by MPIJob ranks (``horovod.torch``)."""
    prepared = prepare(data=get_data(data_dir=data_dir, hp=hp), hp=hp)
    model = train_torch(prepared=prepared, hp=hp)
    return Outputs(model=model, predictions=predict(prepared=prepared, model=model))
