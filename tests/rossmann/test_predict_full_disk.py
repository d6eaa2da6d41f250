"""predict's submission.csv on a full disk (a 64 KB tmpfs): the library's OSError names the file, nothing
half-written is left; the workflow's task turns it into the plugin's recoverable DiskFullError (the library has no
Flyte). Root only (mounting a tmpfs), as CI runs."""

import errno
import os
import subprocess

import pandas as pd
import pytest

from flytekitplugins.horovod import DiskFullError, names_a_full_disk
from rossmann.predict import write_submission


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs (a full disk) needs root")
def test_a_full_disk_names_submission_csv_and_leaves_nothing(tmp_path):
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(tmp_path)], check=True)
    try:
        sub = pd.DataFrame({"Id": range(100_000), "Sales": 1234.5})  # about 1 MB of CSV
        with pytest.raises(OSError) as raw:
            write_submission(sub, tmp_path / "predictions")
        assert raw.value.errno == errno.ENOSPC
        assert list((tmp_path / "predictions").iterdir()) == []
        with pytest.raises(DiskFullError) as err:  # as the workflow's predict task wraps its body
            names_a_full_disk(write_submission)(sub, tmp_path / "predictions")
        assert str(err.value).startswith(f"No space left on device: {tmp_path}/predictions/submission.csv ")
        assert list((tmp_path / "predictions").iterdir()) == []
    finally:
        subprocess.run(["umount", "--lazy", str(tmp_path)], check=False)
