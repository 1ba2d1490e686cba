"""Issue 35, "fix as data everywhere": every error kernlock raises toward the user says what to do as data.

The test reads every module under `kernlock/` (no import) and finds each call that constructs a
`KernlockError` subclass, the names resolved from `kernlock.errors`' classes through each module's
imports. Each such call must pass `fix=` (a real fix, or `NO_FIX` where nothing can be done), never
`fix=None`, and its problem text must not carry a fix (`fix:`), as pip's `DiagnosticPipError` keeps
`hint_stmt` apart from `context` and uv prints `hint:` apart from the error.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import kernlock.errors
from kernlock.errors import KernlockError

pytestmark = pytest.mark.unit

PACKAGE = Path(kernlock.errors.__file__).resolve().parent
ERRORS = {name for name, value in vars(kernlock.errors).items()
          if inspect.isclass(value) and issubclass(value, KernlockError)}
HINT = re.compile(r"`kernlock [^`]*`|; (?:run|re-run|set|pass|install|create|make|fix|pin|lock|use) ")
"""A fix in the problem's words: a quoted `kernlock …` command, or `; run …`-style advice after the problem."""
ERROR_MODULES = {"kernlock.errors", "kernlock"}  # the home of the errors and the facade that re-exports them


def _error_names(tree: ast.Module, path: Path) -> tuple[dict[str, str], set[str]]:
    """Local names that are error classes (`name -> class`) and local names bound to the errors module."""
    names: dict[str, str] = {name: name for name in ERRORS} if path == PACKAGE / "errors.py" else {}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ERROR_MODULES:
            for alias in node.names:
                if alias.name in ERRORS:
                    names[alias.asname or alias.name] = alias.name
                elif node.module == "kernlock" and alias.name == "errors":
                    modules.add(alias.asname or "errors")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "kernlock.errors":
                    modules.add(alias.asname or "kernlock.errors")
    return names, modules


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _constructed(call: ast.Call, names: dict[str, str], modules: set[str]) -> str | None:
    """The error class `call` constructs, if it constructs one."""
    func = call.func
    if isinstance(func, ast.Name):
        return names.get(func.id)
    if isinstance(func, ast.Attribute) and func.attr in ERRORS and _dotted(func.value) in modules:
        return func.attr
    return None


def _texts(node: ast.expr | None) -> list[str]:
    """The literal pieces of a problem argument (strings, f-string parts, both sides of `+` and conditionals)."""
    if node is None:
        return []
    return [piece.value for piece in ast.walk(node) if isinstance(piece, ast.Constant) and isinstance(piece.value, str)]


def violations() -> list[str]:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        names, modules = _error_names(tree, path)
        where = path.relative_to(PACKAGE.parent)
        for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
            error = _constructed(call, names, modules)
            if error is None:
                continue
            fix = next((keyword.value for keyword in call.keywords if keyword.arg == "fix"), None)
            if fix is None:
                found.append(f"{where}:{call.lineno}: {error}(...) has no fix= keyword")
            elif isinstance(fix, ast.Constant) and fix.value in (None, ""):
                found.append(f"{where}:{call.lineno}: {error}(...) passes fix={fix.value!r}; give a fix or NO_FIX")
            problem = call.args[0] if call.args else next(
                (keyword.value for keyword in call.keywords if keyword.arg == "problem"), None)
            if any("fix:" in text or HINT.search(text) for text in _texts(problem)):
                found.append(f"{where}:{call.lineno}: {error}(...) writes its fix into the problem text")
    return found


def test_the_walk_sees_the_errors_module_and_its_users() -> None:
    assert {"KernlockError", "LockfileError", "TrustError", "HubError"} <= ERRORS
    constructed = 0
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names, modules = _error_names(tree, path)
        constructed += sum(_constructed(node, names, modules) is not None
                           for node in ast.walk(tree) if isinstance(node, ast.Call))
    assert constructed > 100  # a resolver that found nothing would pass the next test vacuously


def test_every_error_is_constructed_with_its_fix_as_data() -> None:
    found = violations()
    assert not found, f"{len(found)} error constructions without their fix as data:\n" + "\n".join(found)
