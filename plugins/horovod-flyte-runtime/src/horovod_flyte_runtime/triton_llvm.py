"""Let torch load triton in a process that has imported TensorFlow (TensorFlow >= 2.21 with triton >= 3.x).

TensorFlow loads ``_pywrap_tensorflow_internal`` with ``RTLD_GLOBAL`` (``tensorflow.python.pywrap_dlopen_global_flags``),
which puts ``libtensorflow_framework.so.2`` -- a copy of LLVM, exported -- in the process's global symbol scope.
``triton/_C/libtriton.so`` carries another copy of LLVM, exported and not ``-Bsymbolic``: when it is loaded after
TensorFlow, its static constructors (``_GLOBAL__sub_I_BitcodeWriter.cpp``) call TensorFlow's
``llvm::cl::Option::addArgument``, TensorFlow's option registry already holds ``bitcode-mdindex-threshold``, and LLVM
aborts the process (``LLVM ERROR: inconsistency in registered CommandLine options``, SIGABRT, no traceback). torch
imports triton on the first ``Optimizer(...)``: ``add_param_group`` is ``_disable_dynamo``-wrapped, which imports
``torch._dynamo``, whose ``utils`` calls ``has_triton_package()`` (``import triton``).

``isolate_triton_llvm()`` installs an import hook that loads ``libtriton.so`` with ``RTLD_DEEPBIND`` when TensorFlow
is already imported, so that it binds to its own LLVM; otherwise (no TensorFlow yet: TensorFlow's later global copy
does not affect an already-loaded libtriton) it changes nothing.
"""

import importlib.abc
import importlib.machinery
import os
import sys
from typing import Optional, Sequence

TRITON_EXTENSION = "triton._C.libtriton"


def _tensorflow_loaded() -> bool:
    return "tensorflow" in sys.modules


class _DeepBindLoader(importlib.machinery.ExtensionFileLoader):
    def create_module(self, spec):
        if not _tensorflow_loaded() or not hasattr(os, "RTLD_DEEPBIND"):
            return super().create_module(spec)
        flags = sys.getdlopenflags()
        sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
        try:
            return super().create_module(spec)
        finally:
            sys.setdlopenflags(flags)


class _TritonLLVMFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target=None):
        if fullname != TRITON_EXTENSION:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return spec
        spec.loader = _DeepBindLoader(spec.loader.name, spec.loader.path)
        return spec


def isolate_triton_llvm() -> bool:
    """Install the hook (once) unless triton's extension is already loaded. Returns whether it is installed."""
    if TRITON_EXTENSION in sys.modules:
        return False
    if not any(isinstance(f, _TritonLLVMFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TritonLLVMFinder())
    return True
