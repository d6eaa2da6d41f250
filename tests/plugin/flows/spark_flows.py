"""Spark-route test workflows, run with ``pyflyte run`` like a user would."""

import os
import typing

import flytekit
from flytekit import task, workflow
from flytekitplugins.spark import Spark

from flytekitplugins.horovod import Horovod, HorovodRunner, HorovodSpark, spark_backend, spark_run, spark_store

Fit = typing.NamedTuple("Fit", [("history", typing.Dict[str, typing.List[float]]), ("store_files", typing.List[str]),
                                ("working_directory", str), ("data_module", str), ("transformed_mse", float)])


@task(task_config=HorovodSpark(num_proc=2, spark_conf={"spark.sql.shuffle.partitions": "4"}))
def fit_estimator() -> Fit:
    """Estimator API through the helpers, with the Estimator's default data module: a small linear model fitted on a
    Spark DataFrame by 2 ranks, from a scalar and a vector column (as Horovod's MNIST example's features), then
    transforming it. (Sample weights: tests/plugin/test_in_memory_data.py; here Keras would warn in every epoch that no
    weighted_metrics were given, which the Estimator cannot pass.)"""
    import horovod.spark.keras as hvd_keras
    import tensorflow as tf
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    spark = flytekit.current_context().spark_session
    rows = [(float(i % 7), float(i % 5), 2.0 * (i % 7) - (i % 5) + 1.0) for i in range(400)]
    df = spark.createDataFrame(rows, ["x1", "x2", "y"]).repartition(4)
    df = df.withColumn("x2_and_1", array_to_vector(F.array("x2", F.lit(1.0))))
    x1, x2 = tf.keras.Input(shape=(1,), name="x1"), tf.keras.Input(shape=(2,), name="x2_and_1")
    model = tf.keras.Model([x1, x2], tf.keras.layers.Dense(1)(tf.keras.layers.Concatenate()([x1, x2])))
    store = spark_store()
    estimator = hvd_keras.KerasEstimator(
        backend=spark_backend(),
        store=store,
        model=model,
        optimizer=tf.keras.optimizers.Adam(0.05),
        loss="mse",
        feature_cols=["x1", "x2_and_1"],
        label_cols=["y"],
        batch_size=16,
        epochs=4,
        validation=0.2,
        verbose=0,
    )
    fitted = estimator.fit(df)
    history = {k: [float(v) for v in vs] for k, vs in fitted.getHistory().items()}
    root = store.prefix_path.removeprefix("file://")
    files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
    predicted = fitted.transform(df).select(F.avg((F.col("y__output") - F.col("y")) ** 2)).first()[0]
    return Fit(history, files, str(flytekit.current_context().working_directory),
               estimator.getDataModule().__name__, float(predicted))


@workflow
def estimator_wf() -> Fit:
    return fit_estimator()


def _allreduce_rank_plus_one(scale: float) -> typing.Tuple[int, float]:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    return hvd.rank(), float(hvd.allreduce(tf.constant(scale * (hvd.rank() + 1)), op=hvd.Sum))


@task(task_config=HorovodSpark(num_proc=2))
def run_api(scale: float) -> typing.List[typing.List[float]]:
    return [[float(rank), total] for rank, total in spark_run(_allreduce_rank_plus_one, {"scale": scale}, all_ranks=True)]


@workflow
def run_api_wf(scale: float = 1.0) -> typing.List[typing.List[float]]:
    return run_api(scale=scale)


@task(task_config=HorovodSpark(num_proc=2))
def runner_inside_task() -> float:
    return HorovodRunner(np=2).run(_allreduce_rank_plus_one, scale=10.0)[1]


@workflow
def runner_wf() -> float:
    return runner_inside_task()


def _rank_one_raises():
    import horovod.tensorflow as hvd
    import tensorflow as tf

    if hvd.rank() == 1:
        raise KeyError("rank one lost its key")
    return float(hvd.allreduce(tf.constant(1.0)))


@task(task_config=HorovodSpark(num_proc=2))
def run_api_fails() -> float:
    return spark_run(_rank_one_raises)


@workflow
def failing_wf() -> float:
    return run_api_fails()


@task(task_config=HorovodSpark(num_proc=2, spark_conf={"spark.master": "local[1]"}, horovod=Horovod(start_timeout=3)))
def too_few_slots() -> float:
    return spark_run(_rank_one_raises)


@workflow
def too_few_slots_wf() -> float:
    return too_few_slots()


def _ten_megabytes() -> bytes:
    import horovod.tensorflow as hvd

    return bytes([hvd.rank()]) * (10 * 1024 * 1024)


@task(task_config=Spark(spark_conf={"spark.sql.shuffle.partitions": "4"}))
def plain_spark_first() -> int:
    """A plain flytekitplugins-spark task, as `prepare` in the Rossmann workflow: its session is created first."""
    return flytekit.current_context().spark_session.range(10).count()


@task(task_config=HorovodSpark(num_proc=2))
def ten_megabyte_result(rows: int) -> typing.List[int]:
    """Rank 0's 10 MB result travels as a Spark task result (over 1 MB: fetched from the block manager)."""
    data = spark_run(_ten_megabytes)
    return [rows, len(data), data.count(0)]


@workflow
def big_result_wf() -> typing.List[int]:
    return ten_megabyte_result(rows=plain_spark_first())


def _sleep(seconds: int) -> int:
    import time

    import horovod.tensorflow as hvd

    print(f"rank {hvd.rank()} is sleeping", flush=True)
    time.sleep(seconds)
    return hvd.rank()


@task(task_config=HorovodSpark(num_proc=2))
def spark_sleeps(seconds: int) -> int:
    return spark_run(_sleep, {"seconds": seconds})


@workflow
def spark_sleeping_wf(seconds: int = 120) -> int:
    return spark_sleeps(seconds=seconds)


@task(task_config=Spark(spark_conf={"spark.master": "local[2]"}))
def plain_spark_sleeps(seconds: int) -> int:
    """A plain Spark task (like the Rossmann ``prepare``): a Spark job whose 2 tasks sleep."""

    def slow_row(row: int) -> int:  # defined here: Spark's workers cannot import this file by name
        import time

        print(f"spark task {row} is sleeping", flush=True)
        time.sleep(seconds)
        return row

    return flytekit.current_context().spark_session.sparkContext.parallelize(range(2), 2).map(slow_row).sum()


@workflow
def plain_spark_sleeping_wf(seconds: int = 120) -> int:
    return plain_spark_sleeps(seconds=seconds)


@task(task_config=HorovodSpark(num_proc=2, horovod=Horovod(controller="mpi")))
def spark_mpi_sleeps(seconds: int) -> int:
    return spark_run(_sleep, {"seconds": seconds})


@workflow
def spark_mpi_sleeping_wf(seconds: int = 120) -> int:
    return spark_mpi_sleeps(seconds=seconds)
