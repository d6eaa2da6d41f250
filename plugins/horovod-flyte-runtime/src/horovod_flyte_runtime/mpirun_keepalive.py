"""OpenMPI's TCP keepalive of ``mpirun``'s connections to its daemons on the other hosts, set from
``Horovod.lost_rank_timeout`` (``Horovod.mpirun_args``), and how soon ``mpirun`` therefore gives up on a lost host
(rank 0 of a cluster job waits that long for it after reporting the loss)."""

import math
from typing import Dict


def daemon_keepalive(lost_rank_timeout: float) -> Dict[str, int]:
    """OpenMPI's TCP keepalive for mpirun's connections to the daemons on the other hosts.

    When a host is lost, rank 0 reports it after ``lost_rank_timeout`` s and then waits for mpirun, which waits
    for the lost host's daemon, by default for up to 8 minutes (keepalive after 300 s idle, 9 probes 20 s apart).
    Here it gives up between ``probes * 5`` and ``10 + probes * 5`` s after the loss: always after rank 0 has
    reported (so mpirun's own abort cannot kill rank 0 first), 30 to 40 s for the default timeout.
    """
    probes = math.ceil((lost_rank_timeout + 10) / 5)
    return {"oob_tcp_keepalive_time": 10, "oob_tcp_keepalive_intvl": 5, "oob_tcp_keepalive_probes": probes}


def mpirun_notices_lost_host_within(lost_rank_timeout: float) -> float:
    """Seconds after a host's loss by which mpirun, with ``daemon_keepalive``, has given up on its daemon."""
    keepalive = daemon_keepalive(lost_rank_timeout)
    return keepalive["oob_tcp_keepalive_time"] + keepalive["oob_tcp_keepalive_intvl"] * keepalive["oob_tcp_keepalive_probes"]
