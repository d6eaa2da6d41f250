"""Which framework a task body uses, read from its code: what ``Horovod(framework="auto")`` (the default) initialises.

A body is read, never run: the modules its code imports (``import horovod.torch as hvd`` in the body), the modules it
reads from its globals (``hvd`` imported at the top of its file) or its closure, and the same for the functions it
calls from its own file or from the user's other modules (``from my_training import fit``: a module that is not
installed, such as a file beside the workflow's or the project's own editable package). Of such a module it also
reads what the module imported at its top (``import torch`` there), and of a class the modules its bases come from
(a ``torch.nn.Module`` subclass). Nothing is imported: a module the body imports inside is read only when it is
already loaded. Horovod's framework modules decide first, then the frameworks' own packages.
"""

import dis
import functools
import os
import sys
import sysconfig
import types
from typing import Callable, Iterator, List, Optional, Set

# a module name (or its parent package) -> the framework whose Horovod module serves it; Horovod's own modules first
_HOROVOD_MODULES = {"horovod.torch": "pytorch", "horovod.spark.torch": "pytorch", "horovod.tensorflow": "tensorflow",
                    "horovod.spark.keras": "tensorflow", "horovod.keras": "keras", "horovod.mxnet": "mxnet"}
_PACKAGES = {"torch": "pytorch", "tensorflow": "tensorflow", "keras": "tensorflow", "tf_keras": "tensorflow",
             "mxnet": "mxnet"}
FALLBACK = "tensorflow"  # a body that names no framework (it reaches Horovod through a library): the former default


def body_framework(fn: Callable) -> Optional[str]:
    """The one framework ``fn``'s code names (see the module doc), or None when it names none or several."""
    names = list(modules_named(fn))
    for table in (_HOROVOD_MODULES, _PACKAGES):
        found = {framework for name in names for module, framework in table.items() if _within(name, module)}
        if found:
            return found.pop() if len(found) == 1 else None
    return None


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def body_function(fn: Callable) -> Callable:
    """The function whose code ``fn`` runs: through ``functools.partial`` and decorators (``functools.wraps``)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__wrapped__", fn)


def modules_named(fn: Callable, seen: Optional[Set[int]] = None) -> Iterator[str]:
    """The names of the modules ``fn`` imports or reads, and those of the user's own functions, classes and modules
    it reads (see the module doc)."""
    seen = set() if seen is None else seen
    fn = body_function(fn)
    code = getattr(fn, "__code__", None)
    if code is None or id(fn) in seen:
        return
    seen.add(id(fn))
    scope = dict(getattr(fn, "__globals__", {}))
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not yet filled
            continue
        yield from _named_by(value, fn, seen)
    for value in _imports_and_globals(code, scope):
        yield from _named_by(value, fn, seen)


def _named_by(value: object, fn: Callable, seen: Set[int]) -> Iterator[str]:
    """The module names one value that ``fn`` reads (a module, a module's name, a function or a class) stands for."""
    if isinstance(value, str):  # a module the code imports by name, or a name it imports from one
        yield value
        module, _, name = value.rpartition(".")
        if value in sys.modules:
            yield from _named_by(sys.modules[value], fn, seen)
        elif _users_own(sys.modules.get(module)) and hasattr(sys.modules[module], name):
            yield from _named_by(getattr(sys.modules[module], name), fn, seen)
    elif isinstance(value, types.ModuleType):
        yield value.__name__
        if _users_own(value):
            yield from _module_imports(value, seen)
    elif isinstance(value, type):
        if _users_own(sys.modules.get(value.__module__)) and id(value) not in seen:
            seen.add(id(value))
            yield from (base.__module__ for base in value.__mro__[1:])
            for attribute in vars(value).values():
                if callable(attribute):
                    yield from _named_by(attribute, fn, seen)
    elif callable(value):
        module = getattr(value, "__module__", None)
        if module == fn.__module__ or _users_own(sys.modules.get(module or "")):
            yield from modules_named(value, seen)


def _module_imports(module: types.ModuleType, seen: Set[int]) -> Iterator[str]:
    """The modules a user's own module imported at its top, and where its top-level names (``from torch import nn``,
    ``from torch.optim import Adam``) come from."""
    if id(module) in seen:
        return
    seen.add(id(module))
    for value in list(vars(module).values()):
        if isinstance(value, types.ModuleType):
            yield value.__name__
        elif isinstance(value, (type, types.FunctionType)) and isinstance(getattr(value, "__module__", None), str):
            yield value.__module__


def _installed_paths() -> List[str]:
    paths = {sysconfig.get_paths()[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    return sorted(os.path.realpath(path) + os.sep for path in paths)


_INSTALLED = _installed_paths()


# never the user's, wherever they are installed from (an editable install of this plugin is not a user's module)
_LIBRARIES = ("flytekitplugins", "flyteplugins", "flytekit", "flyte", "horovod")


def _users_own(module: Optional[types.ModuleType]) -> bool:
    """Whether ``module`` is the user's code (a file not under the interpreter's library or site-packages folders)."""
    path = getattr(module, "__file__", None)
    if not path or module.__name__.split(".")[0] in _LIBRARIES:
        return False
    path = os.path.realpath(path)
    return not any(path.startswith(prefix) for prefix in _INSTALLED)


def _imports_and_globals(code: types.CodeType, scope: dict) -> List[object]:
    """What ``code`` (and the functions defined in it) imports, as module names, and the modules, functions and
    classes it reads from ``scope`` (its globals)."""
    found: List[object] = []
    base = ""
    for instruction in dis.get_instructions(code):
        if instruction.opname == "IMPORT_NAME":
            base = instruction.argval
            found.append(base)
        elif instruction.opname == "IMPORT_FROM":
            found.append(f"{base}.{instruction.argval}")
        elif instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME") and instruction.argval in scope:
            value = scope[instruction.argval]
            if isinstance(value, types.ModuleType) or callable(value):
                found.append(value)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _imports_and_globals(const, scope)
    return found
