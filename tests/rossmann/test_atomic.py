"""rossmann.atomic: a file or a folder is replaced whole, and a failed write leaves the previous version alone."""
import errno
import os

import pytest

from rossmann.atomic import atomic_write, replaced_whole


def test_a_file_is_replaced_whole_and_nothing_else_is_left(tmp_path):
    path = tmp_path / "metrics.json"
    atomic_write(path, "old")
    atomic_write(path, b"new")
    assert path.read_text() == "new"
    assert os.listdir(tmp_path) == ["metrics.json"]


def test_a_folder_is_replaced_whole(tmp_path):
    folder = tmp_path / "prepared"
    folder.mkdir()
    (folder / "old.parquet").write_text("old")
    with replaced_whole(folder) as tmp:
        tmp.mkdir()
        (tmp / "new.parquet").write_text("new")
        assert os.listdir(folder) == ["old.parquet"]  # readers see the old folder until the block ends
    assert os.listdir(folder) == ["new.parquet"]
    assert os.listdir(tmp_path) == ["prepared"]


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_failed_write_leaves_the_previous_version_and_no_temporary(tmp_path, kind):
    path = tmp_path / "model"
    path.mkdir() if kind == "folder" else path.write_text("old")
    with pytest.raises(RuntimeError, match="cut short"):
        with replaced_whole(path) as tmp:
            tmp.mkdir() if kind == "folder" else tmp.write_text("half")
            raise RuntimeError("cut short")
    assert os.listdir(tmp_path) == ["model"]
    assert path.is_dir() if kind == "folder" else path.read_text() == "old"


def test_a_full_disk_without_a_file_name_names_the_path(tmp_path):
    path = tmp_path / "submission.csv"
    with pytest.raises(OSError) as err:
        with replaced_whole(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(path)
    assert os.listdir(tmp_path) == []


def test_the_root_cannot_be_replaced():
    with pytest.raises(ValueError, match="not a file or folder that can be replaced"):
        with replaced_whole("/"):
            pass
