"""Nothing outside the lock executes: planted bytecode, shadowing modules and extra libraries are refused."""

from __future__ import annotations

import importlib.util
import py_compile
import re
import subprocess
import sys
from pathlib import Path

import kernels
import pytest

import kernlock
from helpers import FA2, LockedProjectFactory, cli
from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant
from kernlock._internal.project.workspace import VENDOR_ENV
from kernlock._internal.store import hub_cache as cache
from kernlock.errors import IntegrityError
from scripts.harness import python

PLANTED = 'KERNEL_IDENTITY = {"planted": True}\n'




Synced = tuple[Path, LockedKernel, LockedVariant, Path]


@pytest.fixture
def synced(locked_project: LockedProjectFactory) -> Synced:
    """A project locking FA2@v2, synced: (project, its kernel, the variant for this machine, the variant's directory)."""
    project, lock = locked_project([f"{FA2}@v2"])
    assert cli("sync", cwd=project).exit_code == 0
    [entry] = lock.kernels
    variant = entry.variant_for(lock.targets[0])
    return project, entry, variant, cache.variant_dir(entry, variant.name)


def package_of(variant: LockedVariant) -> str:
    return next(f.path for f in variant.files if f.path.endswith("/__init__.py")).rsplit("/", 1)[0]


def plant(root: Path, package: str, attack: str, tmp_path: Path) -> Path:
    """Put one unlocked thing into a variant directory; return it."""
    if attack == "pyc":  # runs instead of the locked __init__.py, whatever the source says
        source = tmp_path / "evil.py"
        source.write_text(PLANTED)
        target = Path(importlib.util.cache_from_source(str(root / package / "__init__.py")))
        target.parent.mkdir(exist_ok=True)
        py_compile.compile(str(source), cfile=str(target), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        return target
    if attack == "module":  # a package shadows the locked `_identity.py` the kernel imports
        target = root / package / "_identity" / "__init__.py"
        target.parent.mkdir()
        target.write_text("def identity(*args):\n    return {'planted': True}\n")
        return target
    target = root / package / "_extra.abi3.so"  # an extra library for anything to dlopen
    target.write_bytes(b"\x7fELF" + b"\0" * 60)
    return target


@pytest.mark.parametrize("attack", ["module", "so"])
def test_planted_files_are_refused_reported_and_repaired(synced: Synced, tmp_path: Path, attack: str) -> None:
    project, entry, variant, root = synced
    planted = plant(root, package_of(variant), attack, tmp_path)
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(IntegrityError, match="does not list") as error:
        kernels.get_kernel(FA2, version=2)
    assert error.value.fix and f"kernlock lock -P {FA2}" in error.value.fix  # if the lock lost it by a hand edit

    verified = cli("verify", "--cache", cwd=project)
    assert verified.exit_code == 1 and "does not list" in verified.output
    assert cli("sync", cwd=project).exit_code == 1
    repaired = cli("sync", "--repair", cwd=project)  # deletes nothing from the shared cache: says what to delete
    assert repaired.exit_code == 1 and "does not hold on the Hub" in repaired.output and planted.exists()
    removed = subprocess.run(re.findall(r"`(rm -r -- [^`]+)`", repaired.output)[0], shell=True, check=False)
    assert removed.returncode == 0 and cache.extra_files(variant, root, bytecode=True) == []
    assert cli("sync", "--repair", cwd=project).exit_code == 0

    module = kernels.get_kernel(FA2, version=2)
    assert module.KERNEL_IDENTITY["repo"] == FA2
    assert cache.extra_files(variant, root, bytecode=True) == []  # importing wrote no bytecode
    assert cli("verify", "--cache", cwd=project).exit_code == 0


def test_planted_bytecode_never_runs_and_is_removed_by_repair(synced: Synced, tmp_path: Path) -> None:
    project, entry, variant, root = synced
    planted = plant(root, package_of(variant), "pyc", tmp_path)
    kernlock.apply(project / "kernels.lock")
    module = kernels.get_kernel(FA2, version=2)
    assert module.KERNEL_IDENTITY.get("planted") is None and module.KERNEL_IDENTITY["repo"] == FA2
    assert type(module.__loader__).__name__ == "SourceOnlyLoader"
    assert sorted(p.name for p in planted.parent.iterdir()) == [planted.name]  # nothing written beside it
    verified = cli("verify", "--cache", cwd=project)
    assert verified.exit_code == 0 and "bytecode caches kernlock never reads" in verified.output
    assert cli("sync", "--repair", cwd=project).exit_code == 0
    assert not planted.parent.exists()


@pytest.mark.slow
def test_bytecode_written_by_an_unlocked_process_is_inert(synced: Synced) -> None:
    project, entry, variant, root = synced
    unlocked = python(f"import kernels; kernels.get_kernel({FA2!r}, revision={entry.commit!r})", project,
                      PYTHONDONTWRITEBYTECODE="")
    assert unlocked.returncode == 0, unlocked.stderr
    assert cache.extra_files(variant, root, bytecode=True)  # Python wrote __pycache__ there
    assert cache.extra_files(variant, root) == []
    kernlock.apply(project / "kernels.lock")
    assert kernels.get_kernel(FA2, version=2).KERNEL_IDENTITY["commit"] == entry.commit


def test_lazily_imported_submodules_never_read_bytecode_and_unlisted_ones_are_refused(synced: Synced,
                                                                                      tmp_path: Path) -> None:
    project, entry, variant, root = synced
    kernlock.apply(project / "kernels.lock")
    module = kernels.get_kernel(FA2, version=2)
    package = root / package_of(variant)
    (package / "late.py").write_text("VALUE = 'source'\n")
    pyc = Path(importlib.util.cache_from_source(str(package / "late.py")))
    pyc.parent.mkdir(exist_ok=True)
    bad = tmp_path / "late.py"
    bad.write_text("VALUE = 'bytecode'\n")
    py_compile.compile(str(bad), cfile=str(pyc), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    with pytest.raises(IntegrityError, match=r"late\.py changed after it was verified \(kernels\.lock does not list it"):
        importlib.import_module(f"{module.__name__}.late")  # after the check: neither its bytecode nor its source runs
    assert f"{module.__name__}.late" not in sys.modules


def test_vendor_directory_with_a_planted_module_is_refused(synced: Synced, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    project, entry, variant, _ = synced
    vendor = tmp_path / "vendor"
    assert cli("vendor", str(vendor), cwd=project).exit_code == 0
    root = cache.vendored_variant_dir(entry, variant.name, vendor)
    plant(root, package_of(variant), "module", tmp_path)
    monkeypatch.setenv(VENDOR_ENV, str(vendor))
    kernlock.apply()
    with pytest.raises(IntegrityError, match="does not list"):
        kernels.get_kernel(FA2, version=2)
    again = cli("vendor", str(vendor), cwd=project)
    assert again.exit_code == 1 and "does not list" in again.output
