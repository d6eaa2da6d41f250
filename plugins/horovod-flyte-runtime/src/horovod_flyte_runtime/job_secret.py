"""The job's secret: a random HMAC key that every process of one Horovod job holds and no other process does.

The launcher makes it (``with_job_secret``) and hands it on in the environment (``Popen(env=...)``, ``mpirun -x
NAME``, a 0600 file for ``horovodrun``'s remote ranks), never on a command line. What the job's processes say to each
other over a socket (a liveness hello, the Spark slot plan, an elastic worker's address) carries an HMAC of the
message under it, with Horovod's own ``secret`` functions; a message without a valid one is refused before it is
parsed.

No flytekit import: ranks and Spark tasks use this module.
"""

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
        length = int(handler.headers.get("Content-Length", ""))
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
