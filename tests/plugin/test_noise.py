"""The known noise of the stack is filtered where it starts (a rank's process here), each TensorFlow line is printed
once, and ``FLYTE_HOROVOD_VERBOSE=1`` shows all of it. The end-to-end counts are held by the runs of the default wf
(tests/workflows/test_rossmann_wf.py) and of an Estimator task (tests/plugin/test_spark_route.py)."""

import subprocess
import sys

import pytest

# a rank's start as start_rank makes it (TensorFlow's logger got its own handler at import, before the rank's), then
# one line of each kind of noise and one line of news
RANK = """
import logging, sys, warnings
logging.getLogger("tensorflow").addHandler(logging.StreamHandler(sys.stderr))  # what importing TensorFlow does
from horovod_flyte_runtime.noise import quiet_this_process
from horovod_flyte_runtime.rank_start import configure_rank_logging
quiet_this_process()
configure_rank_logging(0, 2)
warnings.warn_explicit("pyarrow.localfs is deprecated", FutureWarning, "petastorm/fs_utils.py", 88,
                       module="petastorm.fs_utils")
tf = logging.getLogger("tensorflow")
tf.warning("From %s: unbatch (from tf) is deprecated and will be removed.", "/x/horovod/spark/keras/util.py:71")
tf.info("Assets written to: /tmp/checkpoint/assets")
tf.warning("Callback method `on_train_batch_end` is slow compared to the batch time")
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_noise_is_filtered_unless_verbose_and_tensorflow_lines_print_once(verbose):
    env = {"FLYTE_HOROVOD_VERBOSE": "1"} if verbose else {}
    ran = subprocess.run([sys.executable, "-c", RANK], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stderr.strip().splitlines()
    news = [line for line in lines if "on_train_batch_end" in line]
    assert len(news) == 1 and news[0].startswith("[rank 0/2] "), lines  # once, with the rank's prefix
    noise = ("pyarrow.localfs is deprecated", "unbatch (from tf) is deprecated", "Assets written to")
    assert all(any(text in line for line in lines) == verbose for text in noise), lines
