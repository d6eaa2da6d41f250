"""``make test``'s two pytest runs share the tests marked ``heavy`` (long and CPU-bound, timing nothing), so that the
two end about together on a machine of any speed (scripts/test.sh, docs/testing.md).

Each run takes the heavy tests after its own: the serial run from the first to the last, the other run from the last
to the first. A test runs in the run that claims it first, by creating a file named after it (``O_EXCL``) in the
folder both runs are given in ``FLYTE_HOROVOD_TEST_SHARE``; the other run leaves it out, reporting nothing for it,
and both say at the end which heavy tests ran where. Without the variable (a plain ``pytest``) every test selected
runs, in pytest's order.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import List, Optional

import pytest

SHARE_ENV = "FLYTE_HOROVOD_TEST_SHARE"  # the folder both runs claim the heavy tests in
FROM_LAST_ENV = "FLYTE_HOROVOD_TEST_HEAVY_FROM_LAST"  # "1" in the run that takes them from the last


def _shared(item: pytest.Item) -> bool:
    return item.get_closest_marker("heavy") is not None and item.get_closest_marker("serial") is None


class SharedHeavyTests:
    """The pytest plugin of one of the two runs."""

    def __init__(self, folder: Path, from_last: bool):
        self.folder = folder
        self.from_last = from_last
        self.here: List[str] = []
        self.elsewhere: List[str] = []

    @classmethod
    def from_environment(cls) -> Optional["SharedHeavyTests"]:
        """The plugin for this run, taking both variables out of the environment: a pytest that a test starts is
        not one of the two runs, and inheriting them would make it claim tests in theirs."""
        folder, from_last = os.environ.pop(SHARE_ENV, None), os.environ.pop(FROM_LAST_ENV, None) == "1"
        return cls(Path(folder), from_last) if folder else None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: List[pytest.Item]) -> None:
        heavy = [item for item in items if _shared(item)]
        items[:] = [item for item in items if not _shared(item)] + (heavy[::-1] if self.from_last else heavy)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Optional[bool]:
        if not _shared(item):
            return None
        claim = self.folder / hashlib.sha256(item.nodeid.encode()).hexdigest()
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            self.elsewhere.append(item.nodeid)
            return True  # the other run has it: nothing to run or report here
        self.here.append(item.nodeid)
        return None

    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminalreporter.write_sep("=", f"heavy tests shared with the other run: {len(self.here)} ran here, "
                                        f"{len(self.elsewhere)} there")
        for nodeid in self.elsewhere:
            terminalreporter.write_line(f"ran in the other run: {nodeid}")
