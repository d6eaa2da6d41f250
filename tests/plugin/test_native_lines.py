"""The native start-up lines of TensorFlow and the JVM, which no Python filter reaches, are dropped from a local run's
console by a filter process on file descriptors 1 and 2 (``executor.native_lines``): nothing else is dropped, the order
of the two streams is kept, a partial line still arrives, a terminal stays a terminal, and what a crashing process wrote
last is shown."""

import os
import pty
import subprocess
import sys

from horovod_flyte_runtime.native_lines import is_native_noise

ABSL = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
CUDART = ("I0000 00:00:1795762200.049827    8920 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU "
          "will not be used.")
CUINIT = ("E0000 00:00:1795762207.103831    8920 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
          "Failed call to cuInit: UNKNOWN ERROR (303)")
JAVA = "WARNING: Using incubator modules: jdk.incubator.vector"
ONEDNN = ("I0000 00:00:1795847939.334222   31153 port.cc:153] oneDNN custom operations are on. You may see slightly "
          "different numerical results due to floating-point round-off errors from different computation orders. To "
          "turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.")  # AMD EPYC with AVX-512 VNNI

# a driver that starts the filter, then writes the known lines and others from Python, from native writes to the file
# descriptors and from a child process, ends on a partial line and dies of an abort
PROGRAM = f"""
import os, subprocess, sys
from horovod_flyte_runtime.native_lines import filter_native_stderr
filter_native_stderr()
print("one", flush=True)
os.write(2, b"{ABSL}\\n{CUDART}\\n")
print("two", file=sys.stderr, flush=True)
subprocess.run(["sh", "-c", "echo '[0]<stderr>:{CUINIT}' >&2; echo three; echo '{JAVA}' >&2"])
print("tty", os.isatty(1), os.isatty(2), flush=True)
os.write(2, b"{CUDART} (not at the start)\\nfour, then no newline")
os.abort()
"""


def test_the_known_lines_match_with_or_without_a_rank_prefix_and_nothing_else_does():
    for line in (ABSL, CUDART, CUINIT, JAVA, ONEDNN, f"[0]<stderr>:{ABSL}", f"[1,0]<stderr>:{CUDART}\n",
                 f"[0]<stderr>:{ONEDNN}"):
        assert is_native_noise(line), line
    for line in (f"x {ABSL}", f"{CUDART} (not at the start)", "E0000 00:00:1.0 1 cuda_platform.cc:52] other error",
                 "WARNING: Using incubator modules: jdk.incubator.other", "Traceback (most recent call last):",
                 "I0000 00:00:1.0 1 port.cc:153] oneDNN custom operations are on. Something else."):
        assert not is_native_noise(line), line


def test_a_pipe_keeps_order_and_the_last_words_of_a_crash_and_loses_only_the_known_lines():
    done = subprocess.run([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=60)
    assert done.returncode == -6  # the abort
    assert done.stdout.decode() == (f"one\ntwo\nthree\ntty False False\n{CUDART} (not at the start)\n"
                                    "four, then no newline")


def test_a_terminal_stays_a_terminal():
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the program on a terminal
        os.execv(sys.executable, [sys.executable, "-c", PROGRAM])
    output = b""
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # EIO: every writer has closed
            break
        if not chunk:
            break
        output += chunk
    os.waitpid(pid, 0)
    lines = output.decode().replace("\r\n", "\n")
    assert lines == (f"one\ntwo\nthree\ntty True True\n{CUDART} (not at the start)\nfour, then no newline"), lines
