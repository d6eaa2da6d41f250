"""What one Spark barrier task runs (on an executor, which has no flytekit): its slot from every task's host, the
hosts to the driver's rendezvous server, one rank process; the rank's result comes back through a pipe."""

import json
import os
import socket
import threading
from typing import Dict, List, Optional, Tuple

from .classify import DIED
from .failures import record_failure
from .gloo import PLAN_SCOPE, default_interface, host_plan, interface_of, loopback_interface, rank_env
from .job_secret import job_secret, signed_put
from .processes import PARENT_PID_ENV, Processes
from .rank import RESULT_FD, STDIN, rank_command
from .rank_output import RankOutput


def barrier_rank(job: bytes, extra_env: Dict[str, str], local_mode: bool, address: str, port: int,
                  failure_dir: str, log: Optional[Tuple[str, bool]] = None) -> Tuple[int, int, Optional[bytes]]:
    """Body of one barrier task: its slot from every task's host, the hosts to the driver, one rank process. Its
    lines go to ``log`` (a log file's path, and whether the console shows every rank's lines) as ``RankOutput``
    writes them, else to this process's stdout and stderr."""
    from pyspark import BarrierTaskContext

    ctx = BarrierTaskContext.get()
    infos = ctx.getTaskInfos()
    if local_mode:
        hosts = ["127.0.0.1"] * len(infos)
    else:
        hosts = [socket.gethostbyname(info.address.rsplit(":", 1)[0]) for info in infos]
    slot = host_plan(hosts)[1][ctx.partitionId()]
    # answered once the rendezvous server has the plan; signed with the job secret, which comes in the job's environment
    signed_put(address, port, f"/{PLAN_SCOPE}/hosts", json.dumps(hosts).encode(), job_secret(extra_env))
    iface = loopback_interface() if local_mode else interface_of(slot.hostname) or default_interface()
    env = {**os.environ, **extra_env, **rank_env(slot, address, port, iface), PARENT_PID_ENV: str(os.getpid())}
    read_end, write_end = os.pipe()
    output = RankOutput(*log) if log is not None else None
    processes = Processes(output)
    result: List[bytes] = []
    try:
        try:
            processes.start(f"rank {slot.rank}", rank_command(STDIN, f"{RESULT_FD}{write_end}"), env,
                            prefix=str(slot.rank), stdin=job, pass_fds=(write_end,))
        finally:
            os.close(write_end)  # the rank has its copy; the result pipe ends when the rank does
        reader = threading.Thread(target=lambda: result.append(_read_all(read_end)), daemon=True)
        reader.start()
        failed = processes.wait(on_exit=lambda index, code: record_failure(
            failure_dir, slot.rank, DIED, processes.describe_exit(index, code), replace=False))
        reader.join()
        return slot.rank, failed[1] if failed else 0, result[0] if result else None
    finally:
        os.close(read_end)
        if output is not None:
            output.close()


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)
