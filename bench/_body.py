"""The work every launcher in bench/launch.py runs: import TensorFlow and Horovod, one allreduce of 2 ranks.

``python bench/_body.py`` (under mpirun or horovodrun) does ``hvd.init()`` itself and prints ``RESULT 3.0``;
the Flyte tasks and ``spark_run`` call ``allreduce()`` after the plugin has run ``hvd.init()``.
"""


def allreduce() -> float:
    """Sum of (rank + 1) over all ranks: 3.0 on 2 ranks."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    return float(hvd.allreduce(tf.constant(float(hvd.rank() + 1)), op=hvd.Sum))


def init_and_allreduce() -> float:
    """``hvd.init()`` first: for launchers that do not call it (plain scripts, ``horovod.spark.run``)."""
    import horovod.tensorflow as hvd

    hvd.init()
    return allreduce()


if __name__ == "__main__":
    print(f"RESULT {init_and_allreduce()}", flush=True)
