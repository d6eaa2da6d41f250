"""Elastic Horovod's rendezvous, authenticated with the job's secret (``job_secret``).

Horovod 0.28.1's elastic rendezvous (``horovod.runner.elastic.rendezvous``) unpickles the body of any ``PUT
/worker_addresses/<host>:<rank>`` and serves what it stored to any ``GET``: the address of each worker's notification
service and the HMAC key that service trusts. So anyone who reaches its port runs code in ``horovodrun``, and, with a
key it served, in a rank. Here:

- the launcher's handler (``authenticated_handler``) unpickles a worker's addresses only from a PUT signed with the
  job secret, and never serves them: the driver takes them as they come;
- each elastic rank signs that PUT (``sign_worker_addresses``).

The rest of the rendezvous (the Gloo key-value scopes and ``rank_and_size``) is what Horovod's C++ core reads and
writes; it holds no pickle. ``horovodrun`` serves every request, these included, only signed with the job secret
(``job_secret.signed_rendezvous_server``; the C++ store signs with patch 0014).

No flytekit import: ranks use this module.
"""

from typing import Callable

from .job_secret import job_secret, read_signed_body, signed_put

WORKER_ADDRESSES = "worker_addresses"  # horovod.runner.elastic.rendezvous.PUT_WORKER_ADDRESSES


def _scope(path: str) -> str:
    return path.split("/")[1] if path.count("/") >= 2 else ""


def authenticated_handler(create_handler: Callable[[object], type]) -> Callable[[object], type]:
    """Horovod's ``create_rendezvous_handler(driver)``, with its handler class refusing worker addresses that are not
    signed with the job secret of this process's environment (403, the body not unpickled) and never serving them
    (403)."""
    secret = job_secret()

    def create(driver) -> type:
        class AuthenticatedElasticRendezvousHandler(create_handler(driver)):
            def do_GET(self):
                if _scope(self.path) == WORKER_ADDRESSES:
                    return self.send_status_code(403)
                return super().do_GET()

            def do_PUT(self):
                if _scope(self.path) != WORKER_ADDRESSES:
                    return super().do_PUT()
                body = read_signed_body(self, secret)
                if body is None:
                    return None
                _, scope, key = self.path.split("/", 2)
                self._put_value(scope, key, body)
                return self.send_status_code(200)

        return AuthenticatedElasticRendezvousHandler

    return create


def sign_worker_addresses() -> None:
    """In an elastic rank: Horovod's worker sends its notification service's addresses signed with the job secret."""
    from horovod.runner.common.util import codec
    from horovod.runner.elastic import worker

    def put_signed(addr: str, port: int, scope: str, key: str, value: object) -> None:
        try:
            signed_put(addr, int(port), f"/{scope}/{key}", codec.dumps_base64(value, to_ascii=False), job_secret())
        except OSError as exc:
            raise RuntimeError("Put data input KVStore server failed.", exc) from exc

    worker.put_data_into_kvstore = put_signed
