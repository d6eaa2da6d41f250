"""HorovodRunner outside Flyte, as a plain Python script: ``python runner_script.py NP``."""

import sys

from flytekitplugins.horovod import HorovodRunner


def main(scale: float) -> list:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    total = hvd.allreduce(tf.constant(scale * (hvd.rank() + 1)), op=hvd.Sum)
    return [hvd.rank(), hvd.size(), float(total)]


if __name__ == "__main__":
    print("RESULT", HorovodRunner(np=int(sys.argv[1])).run(main, scale=2.0))
