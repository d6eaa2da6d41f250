"""Known third-party noise of this stack, filtered where it starts: in the ranks (``start_rank``), in the task's own
process (the Spark driver) and in the environment of the processes it starts. Each is harmless and says nothing the
user can act on (docs/stack.md says why each is there); ``Horovod(verbose=True)`` or ``FLYTE_HOROVOD_VERBOSE=1`` keeps
all of it. No flytekit import: ranks and Spark executors run this module.
"""

import logging
import os
import re
import warnings
from typing import Dict

from .rank_output import VERBOSE_ENV

# (category, module pattern): raised by petastorm and Horovod's Spark code on every read of the pinned pyarrow, and by
# the Estimator's own model save (HDF5) and reader reuse, which a user's call cannot avoid
KNOWN_WARNINGS = ((FutureWarning, r"petastorm(\..*)?"), (FutureWarning, r"horovod\.spark(\..*)?"),
                  (UserWarning, r"petastorm\.tf_utils"), (UserWarning, r"horovod\.spark\.keras\.util"))
# loggers whose INFO lines are progress notes of a library ("Assets written to", petastorm's row-group scan): their
# warnings stay
CHATTY_LOGGERS = ("tensorflow", "absl", "petastorm")
# TensorFlow's lines about code the user does not own: a deprecated call in Horovod's own code, and Keras loading a
# model that was saved compiled (the Estimator's) before it is trained or evaluated
KNOWN_TF_LINES = (re.compile(r"From \S*/horovod/\S*: .* is deprecated"),
                  re.compile(r"Compiled the loaded model, but the compiled metrics have yet to be built"))
# TensorFlow's C++ start-up notices (oneDNN, CPU instructions), at import in every process: its warnings stay
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "1"}


def verbose(settings_verbose: bool = False) -> bool:
    """Whether everything is shown: ``Horovod(verbose=True)`` or ``FLYTE_HOROVOD_VERBOSE=1``."""
    return settings_verbose or os.environ.get(VERBOSE_ENV, "") == "1"


def quiet_env(settings_verbose: bool = False) -> Dict[str, str]:
    """The variables that quiet the processes this one starts, less those already set (a user who wants them)."""
    if verbose(settings_verbose):
        return {}
    return {name: value for name, value in QUIET_ENV.items() if name not in os.environ}


def quiet_this_process(settings_verbose: bool = False) -> None:
    """Filter the known warnings and library INFO lines in this process, and quiet the processes it starts."""
    if verbose(settings_verbose):
        return
    os.environ.update(quiet_env())
    for category, module in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", category=category, module=module)
    for name in CHATTY_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level in (logging.NOTSET, logging.INFO, logging.DEBUG):
            logger.setLevel(logging.WARNING)
    logging.getLogger("tensorflow").addFilter(_not_known_noise)


def _not_known_noise(record: logging.LogRecord) -> bool:
    """Whether a TensorFlow log line is news (not one of ``KNOWN_TF_LINES``)."""
    first = record.getMessage().split("\n", 1)[0]
    return not any(known.match(first) for known in KNOWN_TF_LINES)
