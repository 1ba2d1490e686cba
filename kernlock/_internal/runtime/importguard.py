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
   `SourceOnlyLoader`, which hashes the bytes it reads against the lock and
   compiles exactly those bytes in memory, never reading or writing bytecode; a
   source rewritten or added after the load-time check (a lazily imported
   submodule) is refused when it is read. The same verified bytes answer
   `linecache` (`inspect.getsource`, Triton's `@jit`, which re-reads a kernel's
   source at its first launch), so a rewrite after the import is never compiled.
   An extension module found by import loads only when it is a locked file with
   the locked hash, from the very descriptor that was hashed
   (`VerifiedExtensionLoader`): one planted or swapped after the check never runs;
3. a variant path kernlock handed to kernels that no longer resolves to the
   directory it verified (a symlink swapped in a shared cache) is refused.

4. a kernel in kernels 0.19's "zip" build layout (`{metadata.id}.zip`) is imported from the
   archive's bytes as kernlock read and hashed them against the lock (`verified_archive`),
   never from a second read of the file: its `__init__.py` (kernels' `_zip_spec`, wrapped)
   and every submodule (the archive's path entry, which this path hook serves) load
   through `ZipSourceLoader`, sources only (an archive's `.pyc` is never run).

So `__pycache__` directories (Python writes them when a process without kernlock
imports the kernel) are never read and are inert; `kernlock verify --cache` notes
them and `kernlock sync --repair` removes them.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant
from kernlock.errors import IntegrityError

_verified: dict[
    str, tuple[LockedKernel, LockedVariant]
] = {}  # real variant root -> what it must hold
_handed: dict[
    str, str
] = {}  # variant path as handed to kernels (absolute, unresolved) -> its real root
_RESTORE = (
    "restore it with `kernlock sync --repair` (a vendor directory: `kernlock vendor --repair DIR`)"
)


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the source bytes it read, once they match the lock; never reads or writes
    bytecode."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        data = self.get_data(path)
        _check_source(path, data)
        _serve_lines(path, data)
        return self.source_to_code(data, path)


class VerifiedExtensionLoader(importlib.machinery.ExtensionFileLoader):
    """Loads an extension module of a verified variant only when it is a locked file with the locked
    hash.

    The file is opened once, hashed from that descriptor, and that same open file is what `dlopen`
    loads (`/proc/self/fd/N` on Linux): a file swapped or added after the check never runs, not even
    its constructors.
    """

    def create_module(self, spec: Any) -> ModuleType:
        import hashlib

        # the Hub cache links files to blobs
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            digest = hashlib.sha256()
            while chunk := os.read(fd, 1 << 20):
                digest.update(chunk)
            _check_digest(self.path, digest.hexdigest())
            if not os.path.isdir("/proc/self/fd"):
                return super().create_module(spec)
            opened = f"/proc/self/fd/{fd}"
            module = super().create_module(
                importlib.machinery.ModuleSpec(
                    spec.name,
                    importlib.machinery.ExtensionFileLoader(spec.name, opened),
                    origin=opened,
                )
            )
        finally:
            os.close(fd)
        module.__file__ = self.path
        return module


def _serve_lines(filename: str, data: bytes) -> None:
    """Make `linecache` (so `inspect.getsource`, Triton's `@jit`, tracebacks) answer with the
    verified bytes.

    Triton re-reads a kernel's source through `inspect` at its first launch, after the import: a
    file rewritten in between would compile unchecked code. An entry with no mtime is never
    re-checked against the disk.
    """
    import io
    import linecache

    # lines as Python reads a file (at newlines only): `str.splitlines` also splits at a form feed
    lines = io.StringIO(importlib.util.decode_source(data)).readlines()
    linecache.cache[filename] = (len(data), None, lines, filename)


def _check_source(path: str, data: bytes) -> None:
    """Raise `IntegrityError` unless `data`, read from `path`, is a locked file of the variant
    `path` lies in."""
    import hashlib

    _check_digest(path, hashlib.sha256(data).hexdigest())


def _check_digest(path: str, actual: str) -> None:
    """Raise `IntegrityError` unless a file of sha256 `actual`, read from `path`, is a locked file
    of its variant."""
    directory, name = os.path.split(path)
    found = _verified_root(directory)
    if found is None:
        raise IntegrityError(
            f"{path} no longer lies in a verified kernel variant; refusing to import it",
            fix=_RESTORE,
        )
    root, (kernel, variant) = found
    relative = os.path.relpath(os.path.join(os.path.realpath(directory), name), root).replace(
        os.sep, "/"
    )
    expected = next((f.sha256 for f in variant.files if f.path == relative), None)
    if expected != actual:
        what = f"expected sha256 {expected}" if expected else "kernels.lock does not list it"
        raise IntegrityError(
            f"{kernel.spec}: {variant.name}/{relative} changed after it was verified ({what}, read "
            f"{actual}); refusing to import it",
            fix=_RESTORE,
        )


def _verified_root(directory: str) -> tuple[str, tuple[LockedKernel, LockedVariant]] | None:
    """The verified variant root `directory` lies in (files in a Hub cache are links to blobs: pass
    their directory)."""
    real = os.path.realpath(directory)
    for root, locked in _verified.items():
        if real == root or real.startswith(root + os.sep):
            return root, locked
    return None


def _claimed(directory: str) -> bool:
    """Whether `directory` is (inside) a variant kernlock verified or handed to kernels, whatever it
    resolves to now."""
    given = os.path.abspath(directory)
    return _verified_root(directory) is not None or any(
        given == handed or given.startswith(handed + os.sep) for handed in _handed
    )


_archives: dict[
    str, Any
] = {}  # real path of a verified archive -> zipfile.ZipFile over the bytes that were hashed


def verified_archive(path: str) -> Any:
    """The `zipfile.ZipFile` of a locked archive, over the bytes read once and checked against the
    lock."""
    import io
    import zipfile

    real = os.path.realpath(path)
    archive = _archives.get(real)
    if archive is None:
        with open(real, "rb") as file:
            data = file.read()
        # the archive is a locked file of its variant: the same check as a source
        _check_source(path, data)
        archive = _archives[real] = zipfile.ZipFile(io.BytesIO(data))
    return archive


class ZipSourceLoader(importlib.abc.Loader):
    """Runs a module's source from a verified archive (`verified_archive`); never bytecode."""

    def __init__(self, archive: str, member: str) -> None:
        self.archive, self.member = archive, member

    def create_module(self, spec: Any) -> None:
        return None

    def get_source(self, fullname: str) -> str:
        return verified_archive(self.archive).read(self.member).decode("utf-8")

    def is_package(self, fullname: str) -> bool:
        return self.member.endswith("/__init__.py") or self.member == "__init__.py"

    def exec_module(self, module: ModuleType) -> None:
        source = verified_archive(self.archive).read(self.member)
        filename = f"{self.archive}/{self.member}"
        _serve_lines(filename, source)
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)


class _ZipFinder:
    """Finds submodules inside a verified archive (a path entry
    `<variant>/<id>.zip[/<package>]`)."""

    def __init__(self, archive: str, prefix: str) -> None:
        self.archive, self.prefix = archive, prefix

    def find_spec(self, fullname: str, target: Any = None) -> Any:
        names = set(verified_archive(self.archive).namelist())
        tail = fullname.rpartition(".")[2]
        package, module = f"{self.prefix}{tail}/__init__.py", f"{self.prefix}{tail}.py"
        if package in names:
            spec = importlib.util.spec_from_loader(
                fullname,
                ZipSourceLoader(self.archive, package),
                origin=f"{self.archive}/{package}",
                is_package=True,
            )
            assert spec is not None
            spec.submodule_search_locations = [f"{self.archive}/{self.prefix}{tail}"]
        elif module in names:
            spec = importlib.util.spec_from_loader(
                fullname, ZipSourceLoader(self.archive, module), origin=f"{self.archive}/{module}"
            )
        else:
            return None
        assert spec is not None
        spec.has_location = True
        return spec

    def invalidate_caches(self) -> None:
        pass


def zip_spec(spec: Any, variant_path: Path, archive: str) -> Any:
    """kernels' `_zip_spec` for a verified variant: its `__init__.py` from the verified archive
    bytes."""
    if not _claimed(os.fspath(variant_path)):
        return spec  # a local kernel: kernels' own zipimport
    verified_archive(archive)  # before any member runs
    spec.loader = ZipSourceLoader(archive, "__init__.py")
    return spec


def _path_hook(path: str) -> Any:
    """A source-only finder for directories and archives inside verified variants (others: not
    ours)."""
    if not _verified or not _claimed(path):
        raise ImportError("not a verified kernel variant")
    archive, dot_zip, rest = path.partition(".zip")
    if dot_zip and (not rest or rest.startswith(os.sep)) and os.path.isfile(archive + dot_zip):
        prefix = rest.strip(os.sep).replace(os.sep, "/")
        return _ZipFinder(archive + dot_zip, f"{prefix}/" if prefix else "")
    return importlib.machinery.FileFinder(
        path,
        (SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES),
        (VerifiedExtensionLoader, importlib.machinery.EXTENSION_SUFFIXES),
    )


_spec_from_file_location = importlib.util.spec_from_file_location


def spec_from_file_location(
    name: str, location: Any = None, *, loader: Any = None, **kwargs: Any
) -> Any:
    """`importlib.util.spec_from_file_location`, with `SourceOnlyLoader` for sources in verified
    variants."""
    if (
        loader is None
        and location is not None
        and os.fspath(location).endswith(".py")
        and _claimed(os.path.dirname(os.fspath(location)))
    ):
        loader = SourceOnlyLoader(name, os.fspath(location))
    return _spec_from_file_location(name, location, loader=loader, **kwargs)


def is_verified(variant_path: Path) -> bool:
    """Whether kernlock verified `variant_path` against the lock in this process (and handed it to
    kernels)."""
    return _claimed(os.fspath(variant_path))


def register(kernel: LockedKernel, variant: LockedVariant, root: Path) -> None:
    """Remember that `root` was verified to hold exactly `variant`'s locked files."""
    real = os.path.realpath(root)
    _verified[real] = (kernel, variant)
    _handed[os.path.abspath(root)] = real
    if _path_hook not in sys.path_hooks:
        sys.path_hooks.insert(0, _path_hook)
    # how kernels imports a variant's __init__.py
    importlib.util.spec_from_file_location = spec_from_file_location
    for cached in [p for p in sys.path_importer_cache if _claimed(p)]:
        del sys.path_importer_cache[cached]


def guard_import(original: Callable[..., ModuleType]) -> Callable[..., ModuleType]:
    """Wrap kernels' `_import_from_path`: re-check a verified variant right before importing it.

    A path kernlock handed out must still resolve to the directory it verified;
    paths it never handed out (permitted local kernels) are kernels' own.
    """
    from kernlock._internal.store import hub_cache

    # kernels 0.17+ passes `deps` and `repo_info`, 0.16 `repo_info` alone
    def _import_from_path(variant_path: Path, *args: Any, **kwargs: Any) -> ModuleType:
        handed = _handed.get(os.path.abspath(variant_path))
        found = _verified_root(str(variant_path))
        if handed is None and found is None:
            return original(variant_path, *args, **kwargs)
        if handed is not None and os.path.realpath(variant_path) != handed:
            raise IntegrityError(
                f"{variant_path} was verified as {handed} but now resolves to "
                f"{os.path.realpath(variant_path)}; refusing to import it",
                fix=_RESTORE,
            )
        if handed is not None:
            kernel, variant = _verified[handed]
        else:
            assert found is not None  # one of the two, else kernels' own import above
            kernel, variant = found[1]
        hub_cache.check_variant(kernel, variant, Path(variant_path), stamped=True)
        return original(variant_path, *args, **kwargs)

    return _import_from_path
