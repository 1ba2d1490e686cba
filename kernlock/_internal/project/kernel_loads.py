"""Kernels a project's Python code loads by call, for `--scan`: literal `get_kernel("org/repo",
version=N)` (or `revision=`) in its own files, and in the modules of TRL it imports (TRL 1.16's
async GRPO packing loads `kernels-community/flash-attn3` v1 on CUDA, `aiter-flash-attn` v2 on ROCm).

Read as text (AST), never imported. A call under `if torch.version.hip:` is locked for ROCm
targets only, the other branch for CUDA ones (the spec's `devices`); such a target with no build
is recorded as native, as for a model's kernels.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from kernlock._internal.compat.source_kernels import (
    KernelCall,
    kernel_calls,
    package_calls,
    package_root,
)
from kernlock._internal.fs.bounded_read import SOURCE_LIMIT, UnreadableFile, read_bounded
from kernlock._internal.spec.kernel_spec import KernelSpec, Origin, parse_spec

# packages whose modules a project imports are read for the kernels they load
FOLLOWED_PACKAGES = ("trl",)


def _spec(call: KernelCall, origin: Origin, brought_by: str | None = None) -> KernelSpec:
    text = f"{call.repo}@v{call.version}" if call.version is not None else call.repo
    if call.revision is not None and call.version is None:
        text = f"{call.repo}@{call.revision}"
    used = f"{brought_by}: get_kernel at {call.site}" if brought_by else None
    return replace(
        parse_spec(text, origin),
        devices=(call.device,) if call.device else (),
        used_by=(used,) if used else (),
    )


def file_loads(path: Path) -> list[KernelSpec]:
    """The literal kernel loads in one of the project's Python files."""
    where = os.path.relpath(path)
    return [
        _spec(call, Origin(where, int(call.site.rsplit(":", 1)[1])))
        for call in kernel_calls(path, path.parent)
    ]


def _imported(path: Path) -> Iterator[tuple[str, int]]:
    """(module, line) of every import of a followed package in `path`."""
    try:
        tree = ast.parse(read_bounded(path, SOURCE_LIMIT), filename=str(path))
    except (UnreadableFile, SyntaxError, ValueError, RecursionError, MemoryError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in FOLLOWED_PACKAGES:
                yield name, node.lineno


def _shared_prefix(imported: str, module: str) -> int:
    """How many leading dotted parts `imported` shares with `module`."""
    count = 0
    for a, b in zip(imported.split("."), module.split("."), strict=False):
        if a != b:
            break
        count += 1
    return count


def imported_loads(paths: Iterable[Path]) -> list[KernelSpec]:
    """The literal kernel loads of the followed packages' modules the Python files import."""
    first_import: dict[str, str] = {}
    for path in paths:
        for module, line in _imported(path):
            first_import.setdefault(module, f"{os.path.relpath(path)}:{line}")
    specs = []
    for package in FOLLOWED_PACKAGES:
        root = package_root(package)
        modules = [m for m in first_import if m.split(".")[0] == package]
        if root is None or not modules:
            continue
        for call in package_calls(modules, root):
            module = call.site.rsplit(".py:", 1)[0].replace("/", ".")
            # the import nearest the calling module (the longest dotted prefix of it)
            nearest = max(modules, key=lambda m: _shared_prefix(m, module))
            importer = first_import[nearest]
            specs.append(_spec(call, Origin(f"{call.site} (imported at {importer})"), package))
    return specs
