"""The settings of the running Horovod task, as its body reads them: every rank has them in its environment
(``SETTINGS_ENV``, set by ``rank_start.start_rank``).

No flytekit import: rank processes started by Spark tasks use this module.
"""

import importlib
import os

from .settings import FRAMEWORKS, SETTINGS_ENV, Horovod


def current_settings() -> Horovod:
    """The settings of the running Horovod task (read from the environment every rank gets); defaults outside one."""
    text = os.environ.get(SETTINGS_ENV)
    return Horovod.from_json(text) if text else Horovod()


def compression():
    """``Compression.fp16`` of the task's framework when its settings ask for fp16 gradients, else ``none``."""
    settings = current_settings()
    hvd = settings.module() or importlib.import_module(FRAMEWORKS["tensorflow"])
    return hvd.Compression.fp16 if settings.fp16_compression else hvd.Compression.none
