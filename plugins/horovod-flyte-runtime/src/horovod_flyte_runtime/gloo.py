"""Horovod's Gloo contract, as ``horovodrun --gloo`` gives it to each rank: a rendezvous server, a slot plan,
each rank's environment and the network interface it listens on. Used by the local and the Spark launcher.

No flytekit import: Spark tasks run this module's code pickled by value.
"""

import collections
import functools
import json
import socket
import threading
from typing import Dict, List, Optional, Sequence, Tuple

PLAN_SCOPE = "flytekitplugins_horovod_plan"  # the rendezvous path a Spark task PUTs every task's host to


def host_plan(hosts: Sequence[str]) -> Tuple[list, list]:
    """Horovod's slot plan for ranks on ``hosts`` (one entry per rank), and each rank's slot.

    Ranks on one host get consecutive ranks; hosts are ordered by their first entry, so entry 0 is rank 0.
    """
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts

    order = list(dict.fromkeys(hosts))
    counts = collections.Counter(hosts)
    plan = get_host_assignments(parse_hosts(",".join(f"{h}:{counts[h]}" for h in order)), len(hosts))
    free = {h: [s for s in plan if s.hostname == h] for h in order}
    return plan, [free[h].pop(0) for h in hosts]


def rank_env(slot, rendezvous_addr: str, rendezvous_port: int, iface: str) -> Dict[str, str]:
    """Horovod's environment contract for one Gloo rank (what ``horovodrun --gloo`` gives each process)."""
    from horovod.runner.gloo_run import create_run_env_vars, create_slot_env_vars

    env = create_run_env_vars(rendezvous_addr, [iface], rendezvous_port)
    env.update(create_slot_env_vars(slot))
    return {k: str(v) for k, v in env.items()}


def loopback_interface() -> str:
    """The interface that holds 127.0.0.1 (``lo`` on Linux), as Horovod finds it."""
    from horovod.runner.util.network import get_local_intfs

    return next(iter(sorted(get_local_intfs())), "lo")


def interface_of(ip: str) -> Optional[str]:
    """The network interface holding ``ip`` on this host, if any."""
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == ip for a in addresses):
            return name
    return None


def default_interface() -> str:
    """The first interface with a non-loopback IPv4 address (where Gloo listens when no interface holds the
    address a rank is known by, e.g. behind NAT), else the loopback interface."""
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and not a.address.startswith("127.") for a in addresses):
            return name
    return loopback_interface()


def start_rendezvous(verbose: bool, plan: Optional[list] = None, host: str = "", key: Optional[bytes] = None):
    """Horovod's ``RendezvousServer`` listening on ``host`` (every interface by default; on loopback, serving this
    user only: ``loopback.find_port_on``), and its port.

    With a ``plan`` it is initialised at once; without, the first PUT of every task's host (JSON list) to
    ``/PLAN_SCOPE/hosts``, signed with the job secret ``key`` (``job_secret.signed_put``), initialises it, once:
    later PUTs (tasks that start late) must not re-initialise it, since ``init`` clears the keys the started ranks
    have written. An unsigned plan is refused (403), so no one else can put a plan there first; so is every unsigned
    request for the ranks' Gloo keys, where Horovod signs them (``job_secret.signed_requests_only``).
    """
    from horovod.runner.http.http_server import RendezvousHTTPServer, RendezvousServer
    from horovod.runner.util.threads import in_thread

    from .job_secret import signed_requests_only
    from .loopback import find_port_on

    server = RendezvousServer(verbose=1 if verbose else 0)  # RendezvousServer.start, on ``host``
    handler = signed_requests_only(_plan_handler_class(), key)
    server._httpd, _ = find_port_on(host)(lambda addr: RendezvousHTTPServer(addr, handler, server._verbose))
    server._httpd.job_secret = key
    server._listen_thread = in_thread(target=server._httpd.serve_forever)
    if plan is not None:
        server.init(plan)
    return server, server._httpd.server_port


_PLAN_LOCK = threading.Lock()


@functools.lru_cache(maxsize=None)
def _plan_handler_class() -> type:
    from horovod.runner.http.http_server import RendezvousHandler

    from .job_secret import read_signed_body

    class PlanRendezvousHandler(RendezvousHandler):
        """Horovod's rendezvous handler, plus: a signed PUT to ``/PLAN_SCOPE/hosts`` initialises the server with the
        slot plan of those hosts unless a plan was set before; it is answered once the plan is in place."""

        def do_PUT(self):
            if not self.path.startswith(f"/{PLAN_SCOPE}/"):
                return super().do_PUT()
            server = self.server
            body = read_signed_body(self, server.job_secret)
            if body is None:
                return
            hosts = json.loads(body)
            with _PLAN_LOCK:
                if getattr(server, "flyte_hosts", None) is None:
                    server.init(host_plan(hosts)[0])
                    server.flyte_hosts = hosts  # outside the cache, which init() clears
            self.send_status_code(200 if server.flyte_hosts == hosts else 409)

    return PlanRendezvousHandler


def planned_hosts(server) -> Optional[List[str]]:
    """The hosts a Spark stage's tasks reported (one per rank), once the first task did."""
    return getattr(server._httpd, "flyte_hosts", None)


def stop_soon(server) -> None:
    """Stop a rendezvous server without waiting: its loop notices only every half second."""
    threading.Thread(target=server.stop, name="horovod-rendezvous-stop", daemon=True).start()
