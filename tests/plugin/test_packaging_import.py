"""Importing the plugin changes nothing but flytekit's plugin registry; the private internals it relies on exist."""

import subprocess
import sys

from tests.conftest import ROOT

PROBE = """
import logging, os
before_env, before_handlers = dict(os.environ), list(logging.getLogger().handlers)
import flytekitplugins.horovod
changed = sorted(k for k in set(os.environ) | set(before_env) if os.environ.get(k) != before_env.get(k))
print("ENV", changed)
print("HANDLERS", logging.getLogger().handlers == before_handlers)
"""


def test_importing_the_plugin_changes_no_environment_variable_and_no_logging_handler():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "ENV []" in out and "HANDLERS True" in out, out
