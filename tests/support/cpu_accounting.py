"""What each test costs in CPU, its own processes included (the JVMs, ranks and commands it starts), printed at the
end of a pytest run: the suite is CPU-bound on CI's 2 cores, so these seconds, not a test's wall time, say what makes
``make test`` long (docs/testing.md).

Each test runs in a cgroup of its own (Linux cgroup v1's ``cpuacct``, where this process may make one: root, as in
CI): pytest's process joins it for the test's set-up, call and teardown, and every process started meanwhile is born
into it, so its CPU counts to the test even if the process outlives it. A fixture shared between tests (a
session's Spark, a cluster's daemons) has a row of its own, which its processes' later work counts to (a session
JVM's jobs and the Python workers and ranks it forks, a cluster's executors and theirs), not the tests that used it.
Every row is also written to ``.cache/test-cpu/pytest-<pid>.tsv`` under pytest's root folder. Where the controller is
missing or not writable, nothing is measured, printed or written.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
SHOWN = 25


@dataclass
class Cost:
    name: str  # a test's node id, or which shared fixture
    group: Path
    wall: float
    cpu: float = 0.0


class CpuAccounting:
    """The pytest plugin: a cgroup per test and per shared fixture, under ``pytest-<pid>``, all read at the end."""

    def __init__(self, root: Path, tables: Path):
        self.root = root
        self.tables = tables
        self.costs: list[Cost] = []
        self.numbers = itertools.count()
        self.current = root  # the group this process is in

    @classmethod
    def where_possible(cls, rootpath: Path) -> Optional["CpuAccounting"]:
        try:  # under this process's own group: a pytest run inside a test still counts to that test
            own = next(line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                       if "cpuacct" in line.split(":", 2)[1].split(","))
            root = CPUACCT / own.strip("/") / f"pytest-{os.getpid()}"
            _sweep(root.parent)
            root.mkdir()
            _join(root)
        except (OSError, StopIteration):
            return None
        return cls(root, rootpath / ".cache" / "test-cpu")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item):
        with self._in_group("test", item.nodeid):
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        """A fixture shared beyond one test (a session's Spark, a cluster's daemons) has a row of its own: what its
        processes do for the tests after (a cluster's executors and their ranks) counts there, not to the first test."""
        if fixturedef.scope == "function":
            yield
            return
        with self._in_group("fixture", f"{fixturedef.scope} fixture {fixturedef.argname} ({fixturedef.baseid or '.'})"):
            yield

    @contextlib.contextmanager
    def _in_group(self, kind: str, name: str):
        """This process in a new group for the block, then back in the one it was in."""
        group = self.root / f"{kind}-{next(self.numbers)}"
        started = time.monotonic()
        try:
            group.mkdir()
            _join(group)
        except OSError:
            yield
            return
        before, self.current = self.current, group
        try:
            yield
        finally:
            _join(before)
            self.current = before
            self.costs.append(Cost(name, group, time.monotonic() - started))

    def pytest_terminal_summary(self, terminalreporter):
        if not self.costs:
            return
        for cost in self.costs:  # read now: what a test's processes did after it ended counts too
            cost.cpu = _usage(cost.group)
        terminalreporter.write_sep("=", f"CPU of the tests and shared fixtures, {min(SHOWN, len(self.costs))} heaviest "
                                        f"of {len(self.costs)} (core-seconds, their processes included; wall seconds)")
        for cost in sorted(self.costs, key=lambda c: -c.cpu)[:SHOWN]:
            terminalreporter.write_line(f"{cost.cpu:8.1f} cpu {cost.wall:7.1f} wall  {cost.name}")
        self.tables.mkdir(parents=True, exist_ok=True)
        table = self.tables / f"pytest-{os.getpid()}.tsv"
        table.write_text("".join(f"{c.cpu:.1f}\t{c.wall:.1f}\t{c.name}\n" for c in self.costs))
        tests = sum(c.cpu for c in self.costs)
        outside = _usage(self.root) - tests
        terminalreporter.write_line(f"all {len(self.costs)} rows: {tests:.0f} core-seconds; pytest's process outside "
                                    f"them (collection, reporting): {outside:.0f}; every row: {table}")

    def pytest_unconfigure(self):
        _join(self.root.parent)
        _remove(self.root)  # a group a process still ends in (a JVM stopped at exit) is left to the next run's _sweep


def _join(group: Path) -> None:
    """Move this process (all its threads) into ``group``; the processes it starts from now on are born there."""
    (group / "cgroup.procs").write_text(str(os.getpid()))


def _usage(group: Path) -> float:
    """CPU seconds of every process that ever ran in ``group`` or its subgroups."""
    return int((group / "cpuacct.usage").read_text()) / 1e9


def _remove(root: Path) -> None:
    """Remove ``root`` and its groups, each one no process is in."""
    for group in [*root.iterdir(), root]:
        if group.is_dir():
            with contextlib.suppress(OSError):
                group.rmdir()


def _sweep(parent: Path) -> None:
    """Remove the groups an earlier run left (one whose process has ended)."""
    for old in parent.glob("pytest-*"):
        if not Path("/proc", old.name.split("-", 1)[1]).exists():
            _remove(old)
