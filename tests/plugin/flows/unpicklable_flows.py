"""An ``MPIJob`` body that returns a value that cannot be pickled, loaded by path with ``pyflyte run``."""

import socket

from flytekit import task, workflow

from flytekitplugins.horovod import Horovod, MPIJob, Worker


@task(task_config=MPIJob(worker=Worker(replicas=2), horovod=Horovod(framework=None)))
def returns_a_socket() -> int:
    return socket.socket()  # type: ignore[return-value]


@workflow
def socket_wf() -> int:
    return returns_a_socket()
