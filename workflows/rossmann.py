"""Rossmann store-sales forecasting as Flyte tasks: data -> Spark prep -> Horovod training -> prediction.

    pyflyte run workflows/rossmann.py wf                       # synthetic data, Horovod on Spark
    pyflyte run workflows/rossmann.py wf_mpi                   # the same, trained by MPIJob ranks
    pyflyte run workflows/rossmann.py wf --data_dir ./kaggle   # the seven real CSV files
    pyflyte run workflows/rossmann.py wf --hp '{"epochs": 8, "n_stores": 200}'

Every task returns a directory (FlyteDirectory); the logic lives in the ``rossmann`` library.
"""

import dataclasses
import logging
import os
import typing

import flytekit
from flytekit import Resources, task, workflow
from flytekit.types.directory import FlyteDirectory
from flytekitplugins.spark import Spark

from flytekitplugins.horovod import HorovodSpark, MPIJob, Worker, compression, spark_backend, spark_store

log = logging.getLogger("workflows.rossmann")

RANKS = 2  # Horovod ranks of both training tasks (pods are sized before a task body runs)
SPARK_CONF = {"spark.sql.shuffle.partitions": "8", "spark.driver.memory": "4g", "spark.ui.enabled": "false"}


@dataclasses.dataclass
class Hyperparameters:
    """Training and data knobs. ``n_stores``/``start``/``end`` size the synthetic data (ignored for real data)."""

    epochs: int = 6
    batch_size: int = 256
    learning_rate: float = 1e-3
    ranks: int = RANKS
    sample_rate: float = 1.0
    seed: int = 0
    n_stores: int = 50
    start: str = "2013-01-01"
    end: str = "2015-07-31"
    hidden: typing.List[int] = dataclasses.field(default_factory=lambda: [256, 128])


def _workdir(name: str) -> str:
    path = os.path.join(flytekit.current_context().working_directory, name)
    os.makedirs(path, exist_ok=True)
    return path


@task(cache=False)
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
             report.train_rows, report.noise_floor_rmspe)
    return FlyteDirectory(out)


@task(task_config=Spark(spark_conf=SPARK_CONF), requests=Resources(cpu="2", mem="6Gi"))
def prepare(data: FlyteDirectory, hp: Hyperparameters) -> FlyteDirectory:
    """Validate and load the CSV files, engineer features on Spark, write Parquet + metadata.json."""
    from rossmann import data as rdata
    from rossmann import features, report

    spark = flytekit.current_context().spark_session
    source = data.download()
    raw = rdata.load(spark, source)  # a clear RossmannDataError, naming file and column, before any work
    out = os.path.join(flytekit.current_context().working_directory, "prepared")
    features.prepare(spark, raw, out, sample_rate=hp.sample_rate, seed=hp.seed, min_row_groups=max(8, hp.ranks))
    report.carry_synthetic_report(source, out)
    return FlyteDirectory(out)


def _report_training(model_dir: str, prepared_dir: str) -> None:
    """Show the training curves as a Deck; log the validation RMSPE next to the noise floor."""
    from rossmann import report

    metrics = report.add_noise_floor(model_dir, prepared_dir)
    history, _ = report.load_training_outputs(model_dir)
    flytekit.Deck("Training curves", report.training_curves_html(history, metrics))
    log.warning("%s", report.summary(metrics))
    print(report.summary(metrics), flush=True)


@task(task_config=HorovodSpark(num_proc=RANKS, spark_conf=SPARK_CONF), enable_deck=True,
      requests=Resources(cpu="2", mem="8Gi"))
def train(prepared: FlyteDirectory, hp: Hyperparameters) -> FlyteDirectory:
    """Horovod on Spark: KerasEstimator on the prepared Parquet, ``hp.ranks`` ranks as Spark tasks."""
    from rossmann.train import fit_estimator

    spark = flytekit.current_context().spark_session
    out, prepared_dir = _workdir("model"), prepared.download()
    fit_estimator(spark, prepared_dir, spark_backend(num_proc=hp.ranks), spark_store(), epochs=hp.epochs,
                  batch_size=hp.batch_size, learning_rate=hp.learning_rate, hidden=hp.hidden, seed=hp.seed,
                  compression=compression(), out_dir=out)
    _report_training(out, prepared_dir)
    return FlyteDirectory(out)


@task(task_config=MPIJob(worker=Worker(replicas=RANKS)), enable_deck=True, requests=Resources(cpu="2", mem="8Gi"))
def train_mpi(prepared: FlyteDirectory, hp: Hyperparameters) -> FlyteDirectory:
    """The MPI route: this body runs on every rank; each reads its shard of the Parquet row groups."""
    import horovod.tensorflow.keras as hvd
    from rossmann.train import train_rank

    if hp.ranks != hvd.size():
        log.warning("hp.ranks=%d, but the MPIJob config gives %d ranks; training on %d", hp.ranks, hvd.size(),
                    hvd.size())
    out, prepared_dir = _workdir("model"), prepared.download()
    train_rank(prepared_dir, out, epochs=hp.epochs, batch_size=hp.batch_size,
               learning_rate=hp.learning_rate, hidden=hp.hidden, seed=hp.seed, compression=compression())
    if hvd.rank() == 0:
        _report_training(out, prepared_dir)
    return FlyteDirectory(out)


@task(requests=Resources(cpu="2", mem="4Gi"))
def predict(prepared: FlyteDirectory, model: FlyteDirectory) -> FlyteDirectory:
    """Vectorised prediction of the test split; ``submission.csv`` (Id,Sales) with closed stores at 0."""
    from rossmann.predict import load_model, predict_submission, write_submission
    from rossmann.prepared import load_metadata

    prepared_dir, model_dir = prepared.download(), model.download()
    metadata = load_metadata(prepared_dir)
    submission = predict_submission(load_model(os.path.join(model_dir, "model")),
                                    os.path.join(prepared_dir, "test"), metadata)
    path = write_submission(submission, _workdir("predictions"))
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
