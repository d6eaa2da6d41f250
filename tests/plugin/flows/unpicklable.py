"""A value that cannot be pickled crosses between the task and its ranks: the ranks' result (``result``) or a
keyword argument (``kwarg``). Run as a user would run a script:

    python unpicklable.py WHAT      WHAT: result | kwarg

Prints ``ERROR <type>`` and the error's message, or ``NO ERROR``.
"""

import socket
import sys

from flytekitplugins.horovod import HorovodConfigError, HorovodRunner, RankFailedError, RankLostError


def open_socket(unused: object = None) -> socket.socket:
    return socket.socket()


if __name__ == "__main__":
    runner = HorovodRunner(np=-2)
    try:
        if sys.argv[1] == "result":
            runner.run(open_socket)
        else:
            runner.run(open_socket, unused=socket.socket())
        print("NO ERROR")
    except (RankFailedError, RankLostError, HorovodConfigError) as exc:
        print(f"ERROR {type(exc).__name__}\n{exc}")
