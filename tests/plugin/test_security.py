"""Issue 30: no one without a job's secret runs code in it, stops or steers it (docs/security.md).

The attacks (on local elastic, Gloo, mpirun and Spark jobs: one job each, several attacks on it; on rank 0's liveness
port as its heartbeat runs) are ``tests/support/attacks.py``, run here as a user runs a program; the same program gives
docs/reliability.md its security rows. The Spark slot plan and the ranks' command lines are checked here piece by
piece, where a job would make the attack a race.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from horovod_flyte_runtime import gloo
from horovod_flyte_runtime.horovodrun import env_file, rank_commands, remote_command_reading
from horovod_flyte_runtime.job_secret import signed_put
from horovod_flyte_runtime.loopback import LOOPBACK
from tests.support import ROOT, leftovers, run_command
from tests.support.attacks import ATTACKS, http_request

# fault, stall and liveness timings are what these tests assert: make test runs them alone
pytestmark = pytest.mark.serial


@pytest.mark.slow
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_on_a_running_local_job_does_no_harm(attack):
    ran = run_command([sys.executable, "tests/support/attacks.py", attack], timeout=300)
    assert ran.returncode == 0 and "no harm:" in ran.output, ran.output[-4000:]


def test_where_no_network_namespace_can_be_made_the_reason_is_the_kernels():
    """A process whose user the kernel cannot map (``unshare -U`` without a map: uid 65534 there) may not make a user
    namespace: ``isolation()`` says so with the kernel's reason (the line the local launcher then warns with)."""
    probe = "from horovod_flyte_runtime.own_network import isolation; print(isolation())"
    ran = run_command(["unshare", "-U", sys.executable, "-c", probe], timeout=60)
    assert ran.returncode == 0, ran.output[-2000:]
    assert "(None, 'no network namespace could be made here (Operation not permitted, as user 65534)')" in ran.output, \
        ran.output[-2000:]


def test_the_spark_slot_plan_is_taken_only_signed_with_the_job_secret():
    key = os.urandom(32)
    server, port = gloo.start_rendezvous(False, host=LOOPBACK, key=key)
    try:
        path = f"/{gloo.PLAN_SCOPE}/hosts"
        assert http_request(port, "PUT", path, json.dumps(["10.9.9.9"] * 2)) == "403"  # no signature
        with pytest.raises(OSError, match="403"):
            signed_put(LOOPBACK, port, path, json.dumps(["10.9.9.9"] * 2).encode(), os.urandom(32))  # wrong key
        assert gloo.planned_hosts(server) is None
        signed_put(LOOPBACK, port, path, json.dumps([LOOPBACK] * 2).encode(), key)
        assert gloo.planned_hosts(server) == [LOOPBACK] * 2
    finally:
        server.stop()


ONE_RANK_INIT = """
import horovod.torch as hvd, torch
hvd.init()
print("allreduce", hvd.allreduce(torch.ones(3), op=hvd.Sum).tolist())
"""


@pytest.mark.parametrize("secret", ["the job's", "another", "none"])
def test_a_rank_meets_the_gloo_rendezvous_only_with_the_job_secret(secret):
    """Horovod's C++ store signs each request with the rank's ``FLYTE_HOROVOD_JOB_SECRET`` (patch 0014) and the
    rendezvous serves only the job's signature: a rank with another secret, or none, is refused at its first request
    with one error naming it, not after three retries of a 403."""
    key = os.urandom(32)
    plan = gloo.host_plan([LOOPBACK])[0]
    server, port = gloo.start_rendezvous(False, plan, host=LOOPBACK, key=key)
    try:
        env = {k: v for k, v in os.environ.items() if k != "FLYTE_HOROVOD_JOB_SECRET"}
        env.update(gloo.rank_env(plan[0], LOOPBACK, port, gloo.loopback_interface()))
        if secret != "none":
            env["FLYTE_HOROVOD_JOB_SECRET"] = (key if secret == "the job's" else os.urandom(32)).hex()
        ran = subprocess.run([sys.executable, "-c", ONE_RANK_INIT], env=env, capture_output=True, text=True,
                             timeout=120)
    finally:
        server.stop()
    output = ran.stdout + ran.stderr
    if secret == "the job's":
        assert ran.returncode == 0 and "allreduce [1.0, 1.0, 1.0]" in output, output[-3000:]
        return
    assert ran.returncode != 0, output[-3000:]
    reason = "has no" if secret == "none" else "signs with a different"
    assert re.search(rf"the rendezvous server refused PUT /\S+ \(403\): this process {reason} "
                     r"FLYTE_HOROVOD_JOB_SECRET than the job's launcher", output), output[-3000:]
    assert "HTTP response not OK" not in output, output[-3000:]


def test_horovodruns_rank_commands_name_no_environment_but_read_it_from_a_0600_file():
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts

    with env_file({"CANARY": "it's secret", "BASH_FUNC_x%%": "()"}) as path:
        assert os.stat(path).st_mode & 0o777 == 0o600 and os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
        assert open(path).read() == "export CANARY='it'\"'\"'s secret'\n"
        local, remote = get_host_assignments(parse_hosts("localhost:1,10.9.9.9:1"), 2)
        command = rank_commands(path, "HOROVOD_GLOO_RENDEZVOUS_PORT=1 python train.py")
        assert command(local).startswith(f'eval "$(cat {path})" && env HOROVOD_HOSTNAME=localhost')
        assert command(remote).startswith('eval "$(cat)" && exec env HOROVOD_HOSTNAME=10.9.9.9')
        assert "secret" not in command(local) + command(remote)
        assert remote_command_reading(path, lambda command, host: f"ssh {host} {command}")("x", "h") == \
            f"ssh h x < {path}"
    assert not os.path.exists(path)


SLEEPING_JOB = """
import time
from flytekitplugins.horovod import Horovod
from horovod_flyte_runtime.local_launcher import run_local
run_local(lambda: time.sleep(60), num_proc=2, settings=Horovod(framework=None))
"""


@pytest.mark.slow
def test_sigterm_of_the_launching_process_removes_the_job_folder_and_stops_the_ranks(tmp_path):
    marker = f"HVD_TEST_SIGTERM_{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-c", SLEEPING_JOB], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={**os.environ, "TMPDIR": str(tmp_path), marker: "1"})
    try:
        deadline = time.monotonic() + 60
        while len(leftovers(marker)) < 3 and time.monotonic() < deadline:  # the launcher and its 2 ranks
            time.sleep(0.2)
        assert list(tmp_path.glob("horovod-job-*")), "the job did not start"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) != 0
    finally:
        proc.kill()
    assert not list(tmp_path.glob("horovod-job-*")), proc.stderr.read()[-2000:]
    time.sleep(1)
    assert not leftovers(marker)
