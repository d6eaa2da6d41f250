"""The parts of a task's Flyte execution context that a rank rebuilds in its own process.

A rank job takes any object with this class's ``enter`` and ``decks`` (``rank.RankJob.flyte``): this one for flytekit,
``flyteplugins.horovod.rank_context.Flyte2RankContext`` for Flyte 2."""

import contextlib
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional

from . import _shims


@dataclass
class FlyteRankContext:
    """Every rank sees the launching task's execution id, working directory, raw output prefix and checkpoint, so
    ``flytekit.current_context()`` means the same thing in rank 0 as in the task that launched it (as kfpytorch's
    ``Elastic`` rebuilds it for its workers). The checkpoint is rebuilt from its destination and the previous
    attempt's source, so rank 0 can ``restore()`` and ``save()`` it like the task itself."""

    mode: Any
    execution_id: Any
    task_id: Any
    execution_date: Any
    working_directory: str
    raw_output_prefix: str
    checkpoint_dest: Optional[str]
    checkpoint_src: Optional[str]
    enable_deck: bool

    @classmethod
    def capture(cls) -> "FlyteRankContext":
        from flytekit import FlyteContextManager

        ctx = FlyteContextManager.current_context()
        params = ctx.user_space_params
        try:
            dest, src = _shims.checkpoint_paths(params.checkpoint)
        except NotImplementedError:  # this execution has no checkpoint
            dest, src = None, None
        return cls(
            mode=ctx.execution_state.mode,
            execution_id=params.execution_id,
            task_id=params.task_id,
            execution_date=params.execution_date,
            working_directory=str(params.working_directory),
            raw_output_prefix=params.raw_output_prefix,
            checkpoint_dest=dest,
            checkpoint_src=src,
            enable_deck=params.enable_deck,
        )

    @contextlib.contextmanager
    def enter(self, scratch: Optional[str] = None) -> Iterator[Any]:
        """Make this context current in this process; its local sandbox (in ``scratch``, a folder the launcher
        removes even when it has to kill the rank) is removed on the way out."""
        from flytekit import FlyteContextManager
        from flytekit.core.checkpointer import SyncCheckpoint
        from flytekit.core.context_manager import ExecutionParameters
        from flytekit.core.data_persistence import FileAccessProvider
        from flytekit.core.mock_stats import MockStats
        from flytekit.loggers import user_space_logger

        ctx = FlyteContextManager.current_context()
        checkpoint = SyncCheckpoint(self.checkpoint_dest, self.checkpoint_src) if self.checkpoint_dest else None
        params = ExecutionParameters(
            execution_date=self.execution_date,
            tmp_dir=self.working_directory,
            stats=MockStats(),
            execution_id=self.execution_id,
            logging=user_space_logger,
            raw_output_prefix=self.raw_output_prefix,
            checkpoint=checkpoint,
            task_id=self.task_id,
            enable_deck=self.enable_deck,
        )
        sandbox = tempfile.mkdtemp(prefix="flyte-rank-", dir=scratch)
        try:
            file_access = FileAccessProvider(local_sandbox_dir=sandbox, raw_output_prefix=self.raw_output_prefix)
            state = ctx.new_execution_state().with_params(mode=self.mode, user_space_params=params)
            with FlyteContextManager.with_context(
                ctx.with_file_access(file_access).with_execution_state(state)
            ) as new_ctx:
                yield new_ctx
        finally:
            shutil.rmtree(sandbox, ignore_errors=True)

    @staticmethod
    def decks(ctx: Any) -> List[Any]:
        """The Decks the body made in the context ``enter`` yielded (rank 0's reach the task's)."""
        return list(ctx.user_space_params.decks)
