"""Docs are tests: every option, field and default the docs name is checked against the code (names read from it).

- Every inline code span that is a call of a public name (``Horovod(fusion_threshold_mb=0)``,
  ``MPIJob(worker=Worker(replicas=2))``, ``HorovodRunner(np=4).run(main, lr=0.01)``, ``rossmann.synthetic.generate(...)``)
  binds to that name's real signature, so a renamed or removed argument fails here.
- A ``fields MODULE:NAME [complete]`` directive: every snake_case name in the next paragraph is a field of NAME,
  ``name=value`` is its default, ``name: Type`` its type; ``complete``: every field is named.
- The ``horovod-settings`` table: each row's setting, built as ``Horovod(...)``, gives exactly the environment
  variables and ``horovodrun`` flags the row lists (and ``mpirun -x`` the same variables); every field has a row.
"""

import ast
import dataclasses
import importlib
import inspect
import re
import typing
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from tests.docs.markdown import Prose, docs

DOCS = docs()
PROJECT_PACKAGES = ("flytekitplugins", "rossmann", "workflows")  # dotted names under these are imported to resolve
_SNAKE = re.compile(r"^[a-z_][a-z0-9_]*$")


def namespace() -> Dict[str, Any]:
    """The names a doc can call without a module prefix: the plugin's public names, flytekit's, Hyperparameters."""
    import flytekit

    import flytekitplugins.horovod as plugin
    from workflows.rossmann import Hyperparameters

    names = {name: getattr(flytekit, name) for name in ("Resources", "task", "workflow", "Deck")}
    names.update({name: getattr(plugin, name) for name in plugin.__all__})
    names["Hyperparameters"] = Hyperparameters
    return names


FLYTE2_DOC = "flyte2.md"  # the Flyte 2 page: its plugin names are flyteplugins.horovod's


def flyte2_namespace(names: Dict[str, Any]) -> Dict[str, Any]:
    """``names`` with the Flyte 2 plugin's public names (``MPIJob``, ``Worker``, ...) in place of the v1 plugin's."""
    import flyteplugins.horovod as plugin

    return {**names, **{name: getattr(plugin, name) for name in plugin.__all__}}


def _dotted(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def resolve(node: ast.AST, names: Dict[str, Any]) -> Optional[Any]:
    """The object a call's function expression refers to, or None when it is not ours to check."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call):  # Name(...).method(...)
        owner = resolve(node.value.func, names)
        return getattr(owner, node.attr, None) if inspect.isclass(owner) else None
    dotted = _dotted(node)
    if dotted is None:
        return None
    parts = dotted.split(".")
    if parts[0] in names:  # Name or Name.attribute, e.g. HorovodRunner.run
        obj = names[parts[0]]
        for attr in parts[1:]:
            obj = getattr(obj, attr, None)
        return obj if obj is not None else _missing(dotted)
    if parts[0] not in PROJECT_PACKAGES:
        return None
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
        return obj if obj is not None else _missing(dotted)
    return _missing(dotted)


def _missing(dotted: str):
    raise LookupError(f"{dotted} does not exist")


def calls(text: str) -> Iterator[ast.Call]:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return
    yield from (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def test_every_inline_call_binds_to_the_real_signature():
    names, problems, checked = namespace(), [], 0
    for doc in DOCS:
        doc_names = flyte2_namespace(names) if doc.path.name == FLYTE2_DOC else names
        for span in doc.spans:
            for call in calls(span.text):
                try:
                    target = resolve(call.func, doc_names)
                except LookupError as exc:
                    problems.append(f"{span.where}: `{span.text}`: {exc}")
                    continue
                if target is None:
                    continue
                checked += 1
                on_instance = isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call)
                args = [None] * (len(call.args) + on_instance)  # a method called on Name(...): its self too
                kwargs = {k.arg: None for k in call.keywords if k.arg is not None}
                signature = inspect.signature(target)
                try:
                    signature.bind_partial(*args, **kwargs)
                except TypeError as exc:
                    problems.append(f"{span.where}: `{span.text}`: {exc} (signature {signature})")
    assert not problems, "\n".join(problems)
    assert checked >= 25, f"only {checked} calls checked: is the span extraction still working?"


# ---------------------------------------------------------------- fields directives
def fields_of(cls) -> Dict[str, Tuple[Any, Any]]:
    """name -> (default or inspect.Parameter.empty, type annotation) for a dataclass or any callable."""
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        out = {}
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = inspect.Parameter.empty
            out[f.name] = (default, hints.get(f.name))
        return out
    return {p.name: (p.default, p.annotation) for p in inspect.signature(cls).parameters.values()}


def _type_names(annotation) -> List[str]:
    return [getattr(t, "__name__", str(t)) for t in (typing.get_args(annotation) or (annotation,))]


def check_fields(prose: Prose) -> List[str]:
    module, _, name = prose.directive.words[0].partition(":")
    cls = getattr(importlib.import_module(module), name)
    fields, named, problems = fields_of(cls), set(), []
    for span in prose.spans:
        default = type_name = None
        if "=" in span and _SNAKE.match(span.split("=")[0].strip()):
            key, default = (part.strip() for part in span.split("=", 1))
        elif ":" in span and _SNAKE.match(span.split(":")[0].strip()):
            key, type_name = (part.strip() for part in span.split(":", 1))
        elif _SNAKE.match(span):
            key = span
        else:
            continue
        if key not in fields:
            problems.append(f"`{span}`: {name} has no field {key!r} (fields: {', '.join(fields)})")
            continue
        named.add(key)
        real_default, annotation = fields[key]
        if default is not None and ast.literal_eval(default) != real_default:
            problems.append(f"`{span}`: the default of {name}.{key} is {real_default!r}")
        if type_name is not None and type_name not in _type_names(annotation):
            problems.append(f"`{span}`: {name}.{key} is annotated {annotation}")
    if "complete" in prose.directive.options and set(fields) - named:
        problems.append(f"{name} fields not named here: {', '.join(sorted(set(fields) - named))}")
    return problems


FIELDS = [p for d in DOCS for p in d.prose if p.directive.kind == "fields"]


@pytest.mark.parametrize("prose", FIELDS, ids=[p.where for p in FIELDS])
def test_fields_named_in_the_docs_exist_with_their_defaults(prose: Prose):
    problems = check_fields(prose)
    assert not problems, f"{prose.where}:\n" + "\n".join(problems)


def test_fields_check_can_fail():
    from tests.docs.markdown import Directive

    directive = Directive("fields", ["flytekitplugins.horovod:Horovod"], {"complete": ""}, 1)
    prose = Prose(FIELDS[0].doc, 1, "`controller=\"mpi\"`, `start_timeout=60`, `fusion_mb`", directive)
    problems = check_fields(prose)
    assert any("default of Horovod.controller" in p for p in problems)
    assert any("no field 'fusion_mb'" in p for p in problems)
    assert any("not named here" in p for p in problems)
    assert not any(p.startswith("`start_timeout=60`") for p in problems)


# ---------------------------------------------------------------- the Horovod settings table
def table_rows(text: str) -> List[List[str]]:
    """Body rows of a Markdown table, as cells (header and separator left out)."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if "|" in line]
    return [r for r in rows[1:] if not all(set(c) <= set("-: ") for c in r)]


def _spans(cell: str) -> List[str]:
    return re.findall(r"`([^`]+)`", cell)


SETTINGS = [p for d in DOCS for p in d.prose if p.directive.kind == "horovod-settings"]


@pytest.mark.parametrize("prose", SETTINGS, ids=[p.where for p in SETTINGS])
def test_horovod_settings_table_is_what_the_code_does(prose: Prose):
    from flytekitplugins.horovod import Horovod

    baseline = Horovod()
    base_env, base_args = baseline.env(), baseline.horovodrun_args()
    covered, problems = set(), []
    for setting, environment, flags in (row[:3] for row in table_rows(prose.text)):
        source = _spans(setting)[0]  # the cell's first span: keyword arguments, e.g. `autotune=True, ...`
        kwargs = eval(f"dict({source})", {})
        covered |= set(kwargs)
        settings = Horovod(**kwargs)
        env, args = settings.env(), settings.horovodrun_args()
        changed = {k: v for k, v in env.items() if base_env.get(k) != v}
        documented = dict(pair.split("=", 1) for pair in _spans(environment) if "=" in pair)
        if documented != changed:
            problems.append(f"Horovod({source}).env() changes {changed}, the table says {documented}")
        for name, value in documented.items():
            pair = ["-x", f"{name}={value}"]
            if not any(settings.mpirun_args()[i:i + 2] == pair for i in range(len(settings.mpirun_args()))):
                problems.append(f"Horovod({source}).mpirun_args() lacks -x {name}={value}")
        documented_flags = [span.split() for span in _spans(flags)]
        for tokens in documented_flags:
            if not any(args[i:i + len(tokens)] == tokens for i in range(len(args))):
                problems.append(f"Horovod({source}).horovodrun_args() = {args} lacks {' '.join(tokens)}")
        new_flags = {a for a in args if a.startswith("--")} - {a for a in base_args if a.startswith("--")}
        undocumented = new_flags - {t for tokens in documented_flags for t in tokens}
        if undocumented:
            problems.append(f"Horovod({source}) also gives horovodrun {sorted(undocumented)}, not in the table")
    missing = {f.name for f in dataclasses.fields(Horovod)} - covered
    if missing:
        problems.append(f"Horovod fields without a row: {', '.join(sorted(missing))}")
    assert not problems, f"{prose.where}:\n" + "\n".join(problems)


def test_there_is_one_settings_table():
    assert len(SETTINGS) == 1, [p.where for p in SETTINGS]
