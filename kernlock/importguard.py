"""Importing a locked variant runs exactly its locked files: no bytecode is read or written.

Left alone, Python reads `__pycache__/*.pyc` beside a kernel's sources (a planted
`.pyc` compiled with `UNCHECKED_HASH` runs instead of the verified source, whatever
the source says) and writes `__pycache__` there on first import. So:

1. a variant directory must hold exactly the locked files: anything else
   (`__pycache__`, a shadowing module, an extra `.so`) is refused by
   `cache.check_variant`, once when the variant is verified and again right
   before kernels imports it;
2. kernels imports a verified variant with bytecode writing off, and the
   variant's submodules load through a finder that compiles sources in memory and
   never reads `__pycache__` or a bare `.pyc` (extension modules load as usual,
   from the verified files).

Variant directories stay byte-for-byte what the lock lists, also after imports,
also in read-only caches and vendor directories.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from collections.abc import Callable, Iterator
from typing import Any

from kernlock.lockfile import LockedKernel, LockedVariant

_verified: dict[str, tuple[LockedKernel, LockedVariant]] = {}  # real variant root -> what it must hold


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the verified source every time; never reads or writes bytecode."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


def _verified_root(path: str) -> tuple[str, tuple[LockedKernel, LockedVariant]] | None:
    real = os.path.realpath(path)
    for root, locked in _verified.items():
        if real == root or real.startswith(root + os.sep):
            return root, locked
    return None


def _path_hook(path: str) -> importlib.machinery.FileFinder:
    """A source-only finder for directories inside verified variants (others: not ours)."""
    if not _verified or _verified_root(path) is None:
        raise ImportError("not a verified kernel variant")
    return importlib.machinery.FileFinder(
        path,
        (SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES),
        (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
    )


def register(kernel: LockedKernel, variant: LockedVariant, root: Path) -> None:
    """Remember that `root` was verified to hold exactly `variant`'s locked files."""
    real = os.path.realpath(root)
    _verified[real] = (kernel, variant)
    if _path_hook not in sys.path_hooks:
        sys.path_hooks.insert(0, _path_hook)
    for cached in [p for p in sys.path_importer_cache if _verified_root(p) is not None]:
        del sys.path_importer_cache[cached]


class _BytecodeWrites:
    """Turns `sys.dont_write_bytecode` on while any thread imports a verified variant."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.saved = False

    @contextmanager
    def off(self) -> Iterator[None]:
        with self.lock:
            if self.depth == 0:
                self.saved = sys.dont_write_bytecode
                sys.dont_write_bytecode = True
            self.depth += 1
        try:
            yield
        finally:
            with self.lock:
                self.depth -= 1
                if self.depth == 0:
                    sys.dont_write_bytecode = self.saved


_BYTECODE_WRITES = _BytecodeWrites()


def guard_import(original: Callable[..., ModuleType]) -> Callable[..., ModuleType]:
    """Wrap kernels' `_import_from_path`: re-check a verified variant, then import it without bytecode."""
    from kernlock.cache import check_variant

    def _import_from_path(variant_path: Path, deps: dict[str, ModuleType], repo_info: Any = None) -> ModuleType:
        found = _verified_root(str(variant_path))
        if found is None:
            return original(variant_path, deps=deps, repo_info=repo_info)
        kernel, variant = found[1]
        check_variant(kernel, variant, Path(variant_path), stamped=True)
        with _BYTECODE_WRITES.off():
            return original(variant_path, deps=deps, repo_info=repo_info)

    return _import_from_path
