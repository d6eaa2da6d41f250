"""The launching task's Flyte 2 context in each rank of a local run, so that ``flyte.ctx()`` means in rank 0 what it
means in the task: its checkpoint above all (``flyte.ctx().checkpoint``: the previous attempt's to ``load_sync()``,
this attempt's to ``save_sync()``), and its raw data path, action and run. A rank on a cluster is ``a0``, which sets
the context itself.

The runtime's rank job takes it as it takes the v1 plugin's ``FlyteRankContext`` (``enter``, ``decks``).
"""

import contextlib
import dataclasses
from typing import Any, Iterator, List, Optional

from flyte._context import internal_ctx
from flyte.models import TaskContext


@dataclasses.dataclass
class Flyte2RankContext:
    """A copy of the running task's ``TaskContext``, made current in a rank process by ``enter``."""

    task_context: TaskContext

    @classmethod
    def capture(cls) -> Optional["Flyte2RankContext"]:
        """The running task's context (None outside a task), without what is this process's own: the values cached in
        ``data`` (an open checkpoint's temporary folder among them) and the report, which the task publishes."""
        tctx = internal_ctx().data.task_context
        if tctx is None:
            return None
        return cls(dataclasses.replace(tctx, data={}, report=type(tctx.report)(name=tctx.report.name)))

    @contextlib.contextmanager
    def enter(self, scratch: Optional[str] = None) -> Iterator[None]:
        with internal_ctx().replace_task_context(self.task_context):
            yield None

    @staticmethod
    def decks(ctx: Any) -> List[Any]:
        """Flyte 2 has reports, not Decks: rank 0's lines reach the task's report through the launcher."""
        return []
