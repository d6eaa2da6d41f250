"""What every rank of a Flyte 2 Horovod task runs on a cluster: ``python -m flyteplugins.horovod.cluster_rank a0 ...``.

It starts Flyte 2's task entrypoint ``a0`` as a clustered worker, as flyte's own ``clustered`` launcher starts its
workers (flyte 2.12.1 ``_bin/clustered.py``): ``FLYTE_CLUSTERED_WORKER=1`` (``a0`` then runs with no controller: a
rank enqueues no subtasks) and ``RANK``, the rank's Horovod rank from ``mpirun`` or ``horovodrun``, so that only
rank 0 uploads the outputs and the error document (``_internal/runtime/io.py``) and only rank 0 clears a stale one
at its start. ``mpirun`` and ``horovodrun`` pass one environment to every rank, hence a step of each rank's own.
"""

import os
import sys

from horovod_flyte_runtime.rank_start import launched_rank, launched_size


def main() -> None:
    command = sys.argv[1:]
    rank = launched_rank()
    if rank is None or not command:
        raise SystemExit(f"python -m {__spec__.name} COMMAND...: runs a rank that mpirun or horovodrun started, "
                         f"got no rank in the environment (OMPI_COMM_WORLD_RANK, HOROVOD_RANK) or no command")
    os.environ.update(FLYTE_CLUSTERED_WORKER="1", RANK=str(rank), WORLD_SIZE=str(launched_size()))
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
