"""The job's secret: a random HMAC key that every process of one Horovod job holds and no other process does.

The launcher makes it (``with_job_secret``) and hands it on in the environment (``Popen(env=...)``, ``mpirun -x
NAME``, a 0600 file for ``horovodrun``'s remote ranks), never on a command line. What the job's processes say to each
other over a socket (a liveness hello, the Spark slot plan, an elastic worker's address) carries an HMAC of the
message under it, with Horovod's own ``secret`` functions; a message without a valid one is refused before it is
parsed.

Horovod's Gloo rendezvous (the key-value store its C++ core reads and writes) is signed the same way where Horovod is
built with the runtime's patch 0014: each rank's HTTP store signs its requests with the secret in its environment,
and the servers the runtime starts serve only signed ones (``signed_requests_only``).

No flytekit import: ranks and Spark tasks use this module.
"""

import functools
import io
import logging
import os
from typing import Dict, Mapping, Optional

SECRET_ENV = "FLYTE_HOROVOD_JOB_SECRET"  # hex of the key
DIGEST_HEADER = "X-Flyte-Horovod-Digest"  # the HMAC of an HTTP request (see request_message), hex


def with_job_secret(env: Mapping[str, str]) -> Dict[str, str]:
    """``env`` plus a new job secret, unless it holds one already (a rank's own launch inside a job)."""
    from horovod.runner.common.util.secret import make_secret_key

    return {**env, SECRET_ENV: env.get(SECRET_ENV) or make_secret_key().hex()}


def job_secret(env: Mapping[str, str] = os.environ) -> Optional[bytes]:
    """The job secret in ``env`` (this process's environment by default), None where its launcher gave it none."""
    value = env.get(SECRET_ENV, "")
    try:
        return bytes.fromhex(value) or None
    except ValueError:
        return None


def sign(key: Optional[bytes], message: bytes) -> str:
    """The HMAC of ``message`` under the job secret ``key``, hex; ``PermissionError`` without a key."""
    from horovod.runner.common.util.secret import compute_digest

    if key is None:
        raise PermissionError(f"no job secret given (the launcher passes it as {SECRET_ENV})")
    return compute_digest(key, message).hex()


def verify(key: Optional[bytes], message: bytes, digest: Optional[str]) -> bool:
    """Whether ``digest`` (hex) is the HMAC of ``message`` under the job secret ``key`` (never, without a key)."""
    from horovod.runner.common.util.secret import check_digest

    if key is None or not digest:
        return False
    try:
        return check_digest(key, message, bytes.fromhex(digest))
    except ValueError:
        return False


def request_message(method: str, path: str, body: bytes) -> bytes:
    """What the HMAC of an HTTP request covers: its method, path and body."""
    return f"{method} {path}\n".encode() + body


MAX_BODY = 1 << 20  # the largest signed request body read


def signed_put(address: str, port: int, path: str, body: bytes, key: Optional[bytes], timeout: float = 60) -> bytes:
    """PUT ``body`` to ``path`` on the job's HTTP server, signed with the job secret ``key``; its answer."""
    from urllib.request import Request, urlopen

    request = Request(f"http://{address}:{port}{path}", data=body, method="PUT",
                      headers={DIGEST_HEADER: sign(key, request_message("PUT", path, body))})
    with urlopen(request, timeout=timeout) as answer:
        return answer.read()


def read_signed_body(handler, key: Optional[bytes]) -> Optional[bytes]:
    """The body of the request a Horovod HTTP ``handler`` serves, if signed with the job secret ``key``; else None,
    the request answered (400: no readable length or too long, 403: not signed by the job)."""
    try:
        length = int(handler.headers.get("Content-Length", "0"))
    except ValueError:
        length = -1
    if not 0 <= length <= MAX_BODY:
        handler.send_status_code(400)
        return None
    body = handler.rfile.read(length)
    if not verify(key, request_message(handler.command, handler.path, body), handler.headers.get(DIGEST_HEADER)):
        handler.send_status_code(403)
        return None
    return body


@functools.lru_cache(maxsize=None)
def horovod_signs_rendezvous() -> bool:
    """Whether this Horovod build's Gloo HTTP store signs its requests with the job secret (patches/0014)."""
    from horovod.runner.common.util import secret

    return getattr(secret, "RENDEZVOUS_DIGEST_HEADER", None) == DIGEST_HEADER


def signed_requests_only(handler_class: type, key: Optional[bytes]) -> type:
    """Horovod's rendezvous ``handler_class`` serving only GET, PUT and DELETE requests signed with the job secret
    ``key`` (403 otherwise, before the request is served); ``handler_class`` itself, said in one warning line, where
    this Horovod build cannot sign (``horovod_signs_rendezvous``)."""
    if not horovod_signs_rendezvous():
        logging.getLogger("flytekitplugins.horovod").warning(
            "this Horovod build does not sign its Gloo rendezvous requests, so the rendezvous serves unsigned ones: "
            "build Horovod with the runtime's patches (python -m horovod_flyte_runtime.build)")
        return handler_class

    class SignedRequestsOnly(handler_class):
        def _serve_signed(self, serve) -> None:
            body = read_signed_body(self, key)
            if body is None:
                return
            unread, self.rfile = self.rfile, io.BytesIO(body)  # what the handler reads: the body checked
            try:
                serve()
            finally:
                self.rfile = unread

        def do_GET(self):
            self._serve_signed(super().do_GET)

        def do_PUT(self):
            self._serve_signed(super().do_PUT)

        def do_DELETE(self):
            self._serve_signed(super().do_DELETE)

        def do_HEAD(self):  # SimpleHTTPRequestHandler's: the files of the server's working folder
            self.send_status_code(403)

    return SignedRequestsOnly


def signed_rendezvous_server(key: Optional[bytes]) -> type:
    """Horovod's ``RendezvousServer`` whose handler (``start``'s, or Horovod's default) serves only requests signed
    with the job secret ``key`` (``signed_requests_only``)."""
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousServer

    class SignedRendezvousServer(RendezvousServer):
        def start(self, handler_cls=RendezvousHandler):
            return super().start(signed_requests_only(handler_cls, key))

    return SignedRendezvousServer
