"""The public face exports every type it hands out (issue 49 item 4), as packaging exports every type
`Pylock` returns: a return value, or a field or method result of one, reachable from `kernlock.__all__`
is never a private class the user cannot name. (Parameters such as `hub=`, the test seam, are not
handed out.)"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import types
import typing

import pytest

import kernlock

pytestmark = pytest.mark.unit


def _classes(hint: object) -> set[type]:
    """The classes a type hint names (through unions, generics and `Optional`)."""
    if isinstance(hint, type):
        return {hint}
    found: set[type] = set()
    for argument in typing.get_args(hint):
        found |= _classes(argument)
    origin = typing.get_origin(hint)
    if isinstance(origin, type) and origin is not types.UnionType:
        found.add(origin)
    return found


def _namespace(module: types.ModuleType) -> dict[str, object]:
    """The module's globals plus the names its `if TYPE_CHECKING:` blocks import."""
    namespace = dict(vars(module))
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            imports: list[ast.stmt] = [n for n in node.body if isinstance(n, (ast.Import, ast.ImportFrom))]
            exec(compile(ast.Module(imports, type_ignores=[]), module.__name__, "exec"), namespace)
    return namespace


def _hints(obj: object) -> dict[str, object]:
    module = inspect.getmodule(obj)
    assert module is not None
    return typing.get_type_hints(obj, _namespace(module))


def reachable_types() -> dict[type, str]:
    """Every kernlock class reachable from the public names, with the path that reaches it."""
    todo: list[tuple[object, str]] = [(getattr(kernlock, name), name) for name in kernlock.__all__
                                      if name != "__version__"]
    seen: dict[type, str] = {}
    while todo:
        obj, path = todo.pop()
        hints: dict[str, object] = {}
        if inspect.isfunction(obj):
            hints = {"return": _hints(obj).get("return")}
        elif isinstance(obj, type) and obj.__module__.startswith("kernlock"):
            if dataclasses.is_dataclass(obj):
                hints = {f.name: f.type for f in dataclasses.fields(obj) if not f.name.startswith("_")}
                hints = {k: v for k, v in _hints(obj).items() if k in hints}
            for name, member in vars(obj).items():  # public methods and properties
                if name.startswith("_"):
                    continue
                target = member.fget if isinstance(member, property) else member
                if inspect.isfunction(target) and "return" in _hints(target):
                    hints[f"{name}()"] = _hints(target)["return"]
        for name, hint in hints.items():
            for cls in _classes(hint):
                if cls.__module__.startswith("kernlock") and cls not in seen:
                    seen[cls] = f"{path}.{name}"
                    todo.append((cls, f"{path}.{name}"))
    return seen


def test_every_type_the_public_api_hands_out_is_exported() -> None:
    exported = {getattr(kernlock, name) for name in kernlock.__all__ if name != "__version__"}
    private = {f"{cls.__module__}.{cls.__qualname__} (via {path})"
               for cls, path in reachable_types().items() if cls not in exported}
    assert private == set()


def test_the_walk_reaches_nested_fields() -> None:
    """The walk is not vacuous: it reaches a lock's kernels' variants and their files."""
    names = {cls.__name__ for cls in reachable_types()}
    assert {"Lockfile", "LockedKernel", "LockedVariant", "LockedFile", "VerifyReport", "LockResult"} <= names


def test_errors_all_lists_every_public_error_and_the_facade_exports_each() -> None:
    from kernlock import errors

    defined = {name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, errors.KernlockError) and not name.startswith("_")}
    assert set(errors.__all__) == defined
    assert all(getattr(kernlock, name) is getattr(errors, name) for name in errors.__all__)
