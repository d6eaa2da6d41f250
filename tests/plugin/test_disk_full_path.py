"""A full disk met while copying names the destination (the disk that is full), not the file being copied."""

import errno
import os

from flytekitplugins.horovod.disk_full import disk_full_error


def test_a_copy_to_a_full_disk_names_the_destination():
    # as shutil.copy raised it when the Estimator copied the prepared Parquet into its store on a full TMPDIR
    exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/roomy/prepared/part-0.parquet", None,
                  "/full/horovod/store/intermediate_train_data/part-0.parquet")
    error = disk_full_error(exc)
    assert str(error).startswith("No space left on device: /full/horovod/store/intermediate_train_data/part-0.parquet"), \
        str(error)


def test_a_write_to_a_full_disk_names_its_file():
    error = disk_full_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/full/model/weights.h5"))
    assert str(error).startswith("No space left on device: /full/model/weights.h5 (written by the task)"), str(error)
