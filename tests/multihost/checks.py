"""Assertions on what crossed the network, shared by the multi-host tests."""

import ipaddress
import json
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from tests.multihost.network import IFACE, Network
from tests.multihost.observe import Job, Observer


def assert_ranks_across_hosts(seen: Observer, network: Network, ranks: int, workers: Sequence[str],
                              rendezvous: str, controller: str, payload_bytes: int, jobs: int = 1,
                              slots: Optional[Dict[str, int]] = None) -> List[Dict[int, str]]:
    """``jobs`` Horovod jobs ran ranks 0..ranks-1 on ``workers`` (``slots`` each, when given), met at
    ``rendezvous``'s address (not a loopback one), and sent their collective traffic between the worker hosts
    over the bridge; returns each job's rank -> host."""
    context = seen.summary()
    found = list(seen.jobs().values())
    assert len(found) == jobs, f"{len(found)} Horovod jobs seen, expected {jobs}\n{context}"
    hosts = [_check_job(job, network, ranks, workers, rendezvous, controller, slots, context) for job in found]
    for worker in workers:
        sent = seen.delta(worker, "tx_bytes")
        assert sent >= jobs * payload_bytes, \
            f"{worker}'s {IFACE} sent {sent} B, less than {jobs} payload(s) of {payload_bytes} B\n{context}"
    return hosts


def _check_job(job: Job, network: Network, ranks: int, workers: Sequence[str], rendezvous: str, controller: str,
               slots: Optional[Dict[str, int]], context: str) -> Dict[int, str]:
    hosts = job.rank_hosts()
    assert sorted(hosts) == list(range(ranks)), f"ranks seen: {sorted(hosts)}\n{context}"
    assert set(hosts.values()) == set(workers), f"ranks' hosts {hosts}, expected {workers}\n{context}"
    if slots:
        assert Counter(hosts.values()) == Counter(slots), f"ranks per host {Counter(hosts.values())}\n{context}"
    addresses = {network[h].address for h in hosts.values()}
    assert len(addresses) == len(workers), f"ranks' host addresses are not distinct: {addresses}"

    meeting = network[rendezvous].address
    for rank in hosts:
        env = job.env(rank)
        if controller == "gloo":
            address = env.get("HOROVOD_GLOO_RENDEZVOUS_ADDR", "")
            assert address == meeting and not ipaddress.ip_address(address).is_loopback, (rank, env, context)
            assert env.get("HOROVOD_GLOO_IFACE") == IFACE, f"rank {rank}: Gloo interface {env}"  # not lo
        else:  # mpirun: each rank's daemon reports to mpirun (the HNP) at the launcher host's address
            assert f"tcp://{meeting}:" in env.get("OMPI_MCA_orte_hnp_uri", ""), (rank, env, context)

    # rank-to-rank connections between the worker hosts, from one bridge address to another
    for worker in workers:
        others = {network[w].address for w in workers if w != worker}
        own = network[worker].address
        talked = {pair for rank, host in hosts.items() if host == worker for pair in job.peers_of(rank)}
        assert any(local == own and remote in others for local, remote in talked), \
            f"no rank on {worker} had a connection from {own} to {others}: {sorted(talked)}\n{context}"
    return hosts


def rank_markers(folder: Path) -> Dict[int, Dict[str, Any]]:
    """The ``rank-<r>.json`` files the test flows' ranks wrote, by rank."""
    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in folder.glob("rank-*.json")}
