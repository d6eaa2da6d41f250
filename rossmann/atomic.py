"""Writing a file or a folder whole: it is built at a hidden temporary path beside its place and renamed there once
complete, so a reader (or a process killed mid-write) sees the previous version or the new one, never half of one."""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replaced_whole(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh hidden path beside ``path`` for the caller to write a file or a folder at; when the block ends
    without an error, that replaces ``path`` (a folder there is renamed aside first and then removed), else it is
    removed. A full disk reported without a file name names ``path``. A folder is replaced by two renames: a process
    killed between them leaves no ``path`` (nor a half-written one)."""
    path = Path(os.path.abspath(path))
    if not path.name:
        raise ValueError(f"{path}: not a file or folder that can be replaced")
    tag = uuid.uuid4().hex[:8]
    tmp, old = path.with_name(f".{path.name}.tmp-{tag}"), path.with_name(f".{path.name}.old-{tag}")
    try:
        yield tmp
        if path.is_dir() and not path.is_symlink():
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException as err:
        _remove(tmp)
        if isinstance(err, OSError) and err.errno == errno.ENOSPC and not err.filename:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from err
        raise
    _remove(old)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text or bytes) to the file ``path`` whole (``replaced_whole``); return its path."""
    with replaced_whole(path) as tmp:
        with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
    return Path(path)


def _remove(path: Path) -> None:
    """Remove a temporary file or folder of ``replaced_whole`` (named by it, never empty), if it is there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()
