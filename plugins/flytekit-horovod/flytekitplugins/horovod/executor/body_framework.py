"""Which framework a task body uses, read from its code: what ``Horovod(framework="auto")`` (the default) initialises.

A body is read, never run: the modules its code imports (``import horovod.torch as hvd`` in the body), the modules it
reads from its globals (``hvd`` imported at the top of its file) or its closure, and the same for the functions of its
own file that it calls. Horovod's framework modules decide first, then the frameworks' own packages.
"""

import dis
import functools
import types
from typing import Callable, Iterator, List, Optional, Set

# a module name (or its parent package) -> the framework whose Horovod module serves it; Horovod's own modules first
_HOROVOD_MODULES = {"horovod.torch": "pytorch", "horovod.spark.torch": "pytorch", "horovod.tensorflow": "tensorflow",
                    "horovod.spark.keras": "tensorflow", "horovod.keras": "keras", "horovod.mxnet": "mxnet"}
_PACKAGES = {"torch": "pytorch", "tensorflow": "tensorflow", "keras": "tensorflow", "mxnet": "mxnet"}
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


def modules_named(fn: Callable, seen: Optional[Set[int]] = None) -> Iterator[str]:
    """The names of the modules ``fn`` imports or reads, and those of the functions of its own module it reads."""
    seen = set() if seen is None else seen
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__wrapped__", fn)  # a decorated body (functools.wraps): its own code
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
        if isinstance(value, types.ModuleType):
            yield value.__name__
        elif callable(value):
            yield from modules_named(value, seen)
    for value in _imports_and_globals(code, scope):
        if isinstance(value, str):
            yield value
        elif isinstance(value, types.ModuleType):
            yield value.__name__
        elif getattr(value, "__module__", None) == fn.__module__:  # a helper of the body's own file
            yield from modules_named(value, seen)


def _imports_and_globals(code: types.CodeType, scope: dict) -> List[object]:
    """What ``code`` (and the functions defined in it) imports, as module names, and the modules and functions it reads
    from ``scope`` (its globals)."""
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
