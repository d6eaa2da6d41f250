"""Python source that makes ``flytekit`` unimportable in the interpreter that runs it (a meta-path finder put first),
as on a Spark executor or in a Flyte 2 environment: run it with ``-c``, prepend it to a program, or write it as a
``sitecustomize.py`` on PYTHONPATH (which reaches child processes too). An import of flytekit then raises
``ImportError("<name>: flytekit is not installed here")``."""

NO_FLYTEKIT = """
import importlib.abc, sys

class NoFlytekit(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "flytekit":
            raise ImportError(f"{name}: flytekit is not installed here")
        return None

sys.meta_path.insert(0, NoFlytekit())
"""
