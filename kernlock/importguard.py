"""Importing a locked variant runs exactly its verified files: no bytecode is read or written.

Left alone, Python reads `__pycache__/*.pyc` beside a kernel's sources (a planted
`.pyc` compiled with `UNCHECKED_HASH` runs instead of the verified source, whatever
the source says) and writes `__pycache__` there on first import. So, for every
variant directory kernlock verified in this process:

1. the directory must hold exactly the locked files: anything else that Python
   could import or load (a module, a package shadowing a locked module, an extra
   `.so`, a bare `.pyc`, a symlinked directory) is refused by
   `cache.check_variant`, when the variant is verified and again right before
   kernels imports it;
2. the kernel's `__init__.py` and every submodule load through
   `SourceOnlyLoader`, which compiles the verified source in memory and never
   reads or writes bytecode (extension modules load from the verified files).

So `__pycache__` directories (Python writes them when a process without kernlock
imports the kernel) are never read and are inert; `kernlock verify --cache` notes
them and `kernlock sync --repair` removes them.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from kernlock.lockfile import LockedKernel, LockedVariant

_verified: dict[str, tuple[LockedKernel, LockedVariant]] = {}  # real variant root -> what it must hold


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the verified source every time; never reads or writes bytecode."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


def _verified_root(directory: str) -> tuple[str, tuple[LockedKernel, LockedVariant]] | None:
    """The verified variant root `directory` lies in (files in a Hub cache are links to blobs: pass their directory)."""
    real = os.path.realpath(directory)
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


_spec_from_file_location = importlib.util.spec_from_file_location


def spec_from_file_location(name: str, location: Any = None, *, loader: Any = None, **kwargs: Any) -> Any:
    """`importlib.util.spec_from_file_location`, with `SourceOnlyLoader` for sources in verified variants."""
    if loader is None and location is not None and os.fspath(location).endswith(".py") \
            and _verified_root(os.path.dirname(os.fspath(location))) is not None:
        loader = SourceOnlyLoader(name, os.fspath(location))
    return _spec_from_file_location(name, location, loader=loader, **kwargs)


def register(kernel: LockedKernel, variant: LockedVariant, root: Path) -> None:
    """Remember that `root` was verified to hold exactly `variant`'s locked files."""
    real = os.path.realpath(root)
    _verified[real] = (kernel, variant)
    if _path_hook not in sys.path_hooks:
        sys.path_hooks.insert(0, _path_hook)
    importlib.util.spec_from_file_location = spec_from_file_location  # how kernels imports a variant's __init__.py
    for cached in [p for p in sys.path_importer_cache if _verified_root(p) is not None]:
        del sys.path_importer_cache[cached]


def guard_import(original: Callable[..., ModuleType]) -> Callable[..., ModuleType]:
    """Wrap kernels' `_import_from_path`: re-check a verified variant right before importing it."""
    from kernlock.cache import check_variant

    def _import_from_path(variant_path: Path, deps: dict[str, ModuleType], repo_info: Any = None) -> ModuleType:
        found = _verified_root(str(variant_path))
        if found is None:
            return original(variant_path, deps=deps, repo_info=repo_info)
        kernel, variant = found[1]
        check_variant(kernel, variant, Path(variant_path), stamped=True)
        return original(variant_path, deps=deps, repo_info=repo_info)

    return _import_from_path
