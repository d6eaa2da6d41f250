"""Rossmann store-sales forecasting on Flyte 2 (the ``flyte`` SDK): data -> Spark prep -> Horovod training on MPIJob
ranks -> prediction, ``flyte.io.Dir`` between the tasks, the same ``rossmann`` library as ``workflows/rossmann.py``.

    flyte run --local workflows/rossmann_flyte2.py wf                              # synthetic data, 2 ranks
    flyte run --local workflows/rossmann_flyte2.py wf --hp '{"epochs": 8}'

No flytekit: ``prepare`` runs in flyteplugins-spark's session, ``train`` on ``flyteplugins.horovod.MPIJob`` ranks.
"""

import os
import shutil
import tempfile
import typing

import flyte
from flyte.io import Dir
from flyteplugins.spark.task import Spark

from flyteplugins.horovod import Horovod, MPIJob, Worker
from horovod_flyte_runtime.noise import quiet_this_process
from horovod_flyte_runtime.rank_start import launched_rank
from horovod_flyte_runtime.running_settings import compression
from rossmann.hyperparameters import Hyperparameters
from rossmann.spark_conf import SPARK_CONF

RANKS = 2  # Horovod ranks of the training task

base = flyte.TaskEnvironment(name="rossmann", resources=flyte.Resources(cpu=2, memory="4Gi"))
spark = flyte.TaskEnvironment(name="rossmann_spark", plugin_config=Spark(spark_conf=SPARK_CONF),
                              resources=flyte.Resources(cpu=2, memory="6Gi"))
ranks = flyte.TaskEnvironment(name="rossmann_train", resources=flyte.Resources(cpu=2, memory="8Gi"),
                              plugin_config=MPIJob(worker=Worker(replicas=RANKS),
                                                   horovod=Horovod(framework="tensorflow")))
driver = flyte.TaskEnvironment(name="rossmann_wf", depends_on=[base, spark, ranks])


def _folder(name: str) -> str:
    return tempfile.mkdtemp(prefix=f"rossmann-{name}-")


@base.task
def get_data(data: typing.Optional[Dir], hp: Hyperparameters) -> Dir:
    """The seven input CSV files: the given directory, or synthetic ones with a known noise floor."""
    from rossmann import report, synthetic

    if data is not None:
        return data
    out = _folder("data")
    made = synthetic.generate(out, n_stores=hp.n_stores, start=hp.start, end=hp.end, seed=hp.seed)
    report.save_synthetic_report(made, out)
    print(f"[get_data] synthetic data: {made.n_stores} stores, {made.train_rows} train rows", flush=True)
    return Dir.from_local_sync(out)


@spark.task
def prepare(data: Dir, hp: Hyperparameters) -> Dir:
    """Validate and load the CSV files, engineer features on Spark, write Parquet + metadata.json."""
    from rossmann import data as rdata
    from rossmann import features, report

    quiet_this_process()
    session = flyte.ctx().data["spark_session"]  # flyteplugins-spark's
    source = data.download_sync()
    raw = rdata.load(session, source)  # a clear RossmannDataError, naming file and column, before any work
    out = os.path.join(_folder("prepared"), "prepared")
    features.prepare(session, raw, out, sample_rate=hp.sample_rate, seed=hp.seed, min_row_groups=max(8, RANKS))
    report.carry_synthetic_files(source, out)
    return Dir.from_local_sync(out)


@ranks.task(report=True)
def train(prepared: Dir, hp: Hyperparameters) -> Dir:
    """Runs on every rank (``horovod.tensorflow`` initialised by the plugin), each reading its shard of the Parquet
    row groups; rank 0's model directory is the output, its epochs in the task's report as they finish. Rank 0
    restores the task's checkpoint (a previous attempt's: a retry resumes after its last epoch) and saves one after
    every epoch."""
    from rossmann import report
    from rossmann.predict import submission_from_dirs
    from rossmann.train import train_rank

    quiet_this_process()
    rank, checkpoint = launched_rank() or 0, flyte.ctx().checkpoint
    prepared_dir, out, checkpoint_dir = prepared.download_sync(), _folder("model"), _folder("checkpoint")
    restored = checkpoint.load_sync() if checkpoint is not None and rank == 0 else None
    if restored is not None:
        shutil.copytree(restored, checkpoint_dir, dirs_exist_ok=True)
        print(f"[train] restored the previous attempt's checkpoint ({checkpoint.remote_source})", flush=True)
    train_rank(prepared_dir, out, epochs=hp.epochs, batch_size=hp.batch_size, learning_rate=hp.learning_rate,
               hidden=hp.hidden, seed=hp.seed, compression=compression(), checkpoint_dir=checkpoint_dir,
               checkpoint_saved=checkpoint.save_sync if checkpoint is not None else None)
    if rank == 0:
        scores = report.score_test(submission_from_dirs(prepared_dir, out), prepared_dir)
        print(report.summary(report.add_scores(out, prepared_dir, scores)), flush=True)
    return Dir.from_local_sync(out)


@base.task
def predict(prepared: Dir, model: Dir) -> Dir:
    """Vectorised prediction of the test split; ``submission.csv`` (Id,Sales) with closed stores at 0."""
    from rossmann import report
    from rossmann.predict import submission_from_dirs, write_submission

    quiet_this_process()
    prepared_dir, model_dir = prepared.download_sync(), model.download_sync()
    submission = submission_from_dirs(prepared_dir, model_dir)
    path = write_submission(submission, _folder("predictions"))
    scores = report.score_test(submission, prepared_dir)
    if scores:
        print(f"submission.csv: test RMSPE {scores['test_rmspe']:.4f}, perfect model {scores['test_perfect_rmspe']:.4f} "
              f"on the same {scores['test_rows_scored']} rows", flush=True)
    return Dir.from_local_sync(os.path.dirname(path))


@driver.task
async def wf(data: typing.Optional[Dir] = None, hp: Hyperparameters = Hyperparameters()) -> typing.Tuple[Dir, Dir]:
    """Synthetic (or given) data -> Spark prep -> Horovod training on MPIJob ranks -> submission.csv; returns the
    model and the predictions directories."""
    prepared = await prepare.aio(data=await get_data.aio(data=data, hp=hp), hp=hp)
    model = await train.aio(prepared=prepared, hp=hp)
    return model, await predict.aio(prepared=prepared, model=model)
