"""The per-rank entrypoints the cluster launcher knows, one per Flyte SDK: where in a rank's command the task's output
and raw output prefixes are, how the launcher writes the task's error there, and what it exits with then.

No flytekit import at the top: the Flyte 2 plugin's launcher runs where flytekit is not installed.
"""

import os
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence


@dataclass(frozen=True)
class Entrypoint:
    """A Flyte SDK's per-rank entrypoint: the options naming the task's output and raw output prefixes, how the
    launcher writes the task's error there, and what it exits with after writing it."""

    outputs_option: str
    raw_option: str
    write_error: Callable[[str, Optional[str], BaseException], None]  # (outputs prefix, raw prefix, error)
    exit_after_error: Callable[[], int]


def _write_flytekit_error(outputs: str, raw: Optional[str], error: BaseException) -> None:
    """``error.pb`` in the Flyte context ``pyflyte-execute`` itself would set up."""
    from flytekit.bin.entrypoint import setup_execution

    from . import _shims

    with setup_execution(raw, output_metadata_prefix=outputs) as ctx:
        _shims.write_error_document(ctx, error)


def _flytekit_exit() -> int:
    """0, as ``pyflyte-execute`` exits after writing an error it caught; 1 where ``FLYTE_FAIL_ON_ERROR`` is true."""
    from flytekit.core.constants import FLYTE_FAIL_ON_ERROR
    from flytekit.core.utils import str2bool

    return 1 if str2bool(os.getenv(FLYTE_FAIL_ON_ERROR)) else 0


def _write_flyte2_error(outputs: str, raw: Optional[str], error: BaseException) -> None:
    from .flyte2_error import write_flyte2_error

    write_flyte2_error(outputs, error)


_PYFLYTE = Entrypoint("--output-prefix", "--raw-output-data-prefix", _write_flytekit_error, _flytekit_exit)
# The entrypoints the launcher knows, by the word that starts them: flytekit's task and map_task element entrypoints
# (propeller runs each element of a map_task over an MPIJob task as its own MPIJob, with this launcher around
# ``pyflyte-map-execute``), and Flyte 2's ``a0``, which exits 0 after uploading an error (flyte 2.12.1
# ``_bin/runtime.py``)
ENTRYPOINTS: Dict[str, Entrypoint] = {
    "pyflyte-execute": _PYFLYTE,
    "pyflyte-map-execute": _PYFLYTE,
    "a0": Entrypoint("--outputs-path", "--raw-data-path", _write_flyte2_error, lambda: 0),
}


def entrypoint(command: Sequence[str]) -> str:
    """The Flyte entrypoint ``command`` runs on every rank (``SystemExit`` naming the command where none is)."""
    found = next((word for word in command if word in ENTRYPOINTS), None)
    if found is None:
        raise SystemExit(f"cluster_launcher: no {' or '.join(ENTRYPOINTS)} in the launcher command {' '.join(command)}")
    return found


def option(command: Sequence[str], name: str, after: str) -> Optional[str]:
    """The value of option ``name`` in ``command`` after the word ``after``."""
    words = list(command[command.index(after):]) if after in command else []
    return words[words.index(name) + 1] if name in words[:-1] else None


def raw_output_prefix(command: Sequence[str]) -> Optional[str]:
    """The task's raw output prefix (where the ranks' failure folder is) in the launcher ``command``."""
    name = entrypoint(command)
    return option(command, ENTRYPOINTS[name].raw_option, name)


def outputs_prefix(command: Sequence[str]) -> Optional[str]:
    """The task's output prefix (where ``outputs.pb`` and ``error.pb`` go) in the launcher ``command``."""
    name = entrypoint(command)
    return option(command, ENTRYPOINTS[name].outputs_option, name)
