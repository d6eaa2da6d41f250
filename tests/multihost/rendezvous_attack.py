"""An attacker in another host: a process without the job's secret sends Horovod's Gloo rendezvous requests while
the job runs (``tests/support/attacks.py requests``, in that host's network)."""

import json
import subprocess
import sys
import threading
import time
from typing import List, Optional

from tests.multihost.conftest import IMAGE_ENV
from tests.multihost.network import Host
from tests.multihost.observe import Observer
from tests.support import ROOT
from tests.support.attacks import Request


class RendezvousAttack:
    """Once a rank's environment (as ``observer`` samples it) names the job's rendezvous, ``requests`` go to it from
    ``host`` (its network; the image's environment, no job secret); ``answers`` holds their outcomes (a status, or
    "dropped"), ``None`` until sent. Use as a context around the job."""

    def __init__(self, observer: Observer, host: Host, requests: List[Request], timeout: float = 120):
        self.observer, self.host, self.requests, self.timeout = observer, host, requests, timeout
        self.answers: Optional[List[str]] = None
        self.error: Optional[str] = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._attack, name="rendezvous-attacker", daemon=True)

    def __enter__(self) -> "RendezvousAttack":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def outcome(self) -> str:
        """What the attacker got, one line (``tests/support/attacks.py``'s form: a security row of reliability.md)."""
        got = self.error or "/".join(self.answers or [])
        return f"no harm: from host {self.host.name}, without the job's secret: {got}; the job finished"

    def _rendezvous(self) -> Optional[tuple]:
        for seen in list(self.observer.seen.values()):
            if "HOROVOD_GLOO_RENDEZVOUS_PORT" in seen.env:
                return seen.env["HOROVOD_GLOO_RENDEZVOUS_ADDR"], int(seen.env["HOROVOD_GLOO_RENDEZVOUS_PORT"])
        return None

    def _attack(self) -> None:
        deadline = time.monotonic() + self.timeout
        while (found := self._rendezvous()) is None:
            if self._done.is_set() or time.monotonic() > deadline:
                self.error = "no rank named its rendezvous while the job ran"
                return
            time.sleep(0.05)
        address, port = found
        ran = subprocess.run(self.host.command([sys.executable, str(ROOT / "tests/support/attacks.py"), "requests",
                                                json.dumps([port, self.requests, address])]),
                             env={"PATH": IMAGE_ENV["PATH"]}, capture_output=True, text=True, timeout=60)
        if ran.returncode != 0:
            self.error = f"the attacker failed: {ran.stderr[-2000:]}"
            return
        self.answers = json.loads(ran.stdout)
