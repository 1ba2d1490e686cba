"""kernels 0.19's "zip" build layout (issue 34): a variant holding `{metadata.id}.zip` is locked, verified
(`verify --cache`), loaded under `apply()` with its submodule read from the archive's verified bytes, and
refused before any member is imported when a byte of the archive changed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import kernels
import pytest

import kernlock
from helpers import CPU, LockedProjectFactory, cli
from kernlock._internal.compat.kernels_api import line
from kernlock.errors import IntegrityError
from kernlock.testing.hub import TestHub

pytestmark = [
    pytest.mark.skipif(not line().PYTHON_ABI, reason="the zip build layout is new in kernels 0.19"),
    pytest.mark.usefixtures("release_and_unload_kernels"),
]

ZIPPED = "kernels-community/zipped"
VARIANT = "torch213-cxx11-cpu-x86_64-linux"




def _archive(lock) -> str:
    [archive] = [f.path for f in lock.kernels[0].variant_for(CPU).files if f.path.endswith(".zip")]
    return archive


def test_a_zip_build_is_locked_with_its_archive_hashed(locked_project: LockedProjectFactory) -> None:
    _, lock = locked_project([f"{ZIPPED}@v1"], targets=[CPU])
    variant = lock.kernels[0].variant_for(CPU)
    assert variant.name == VARIANT
    assert sorted(f.path for f in variant.files) == sorted([_archive(lock), "metadata.json"])
    assert variant.digest == "sha256"  # kernel-builder's digest lists the archive, checked when locking


def test_a_zip_build_loads_under_apply_with_its_submodule(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{ZIPPED}@v1"], targets=[CPU])
    kernlock.apply(project / "kernels.lock")
    module = kernels.get_kernel(ZIPPED, version=1)
    assert module.add(2, 3) == 5  # from the submodule `impl`, inside the archive
    assert module.KERNEL_IDENTITY["commit"] == lock.kernels[0].commit
    assert module.KERNEL_IDENTITY["variant"] == VARIANT
    assert module.__file__.endswith(f"{_archive(lock)}/__init__.py")
    verified = cli("verify", "--cache", "--json", cwd=project)
    cache = next(c for c in json.loads(verified.output)["checks"] if c["name"] == "cache")
    assert verified.exit_code == 0 and cache["ok"] and cache["problems"] == []


def _flip(path: Path) -> None:
    real = path.resolve()  # a Hub cache file is a link to its blob
    data = bytearray(real.read_bytes())
    data[len(data) // 2] ^= 0x01
    real.chmod(0o644)
    real.write_bytes(bytes(data))


def test_a_flipped_byte_in_the_archive_is_refused_before_any_member_is_imported(
        hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{ZIPPED}@v1"], targets=[CPU])
    assert cli("sync", cwd=project).exit_code == 0
    from kernlock._internal.store.hub_cache import hub_cache_dir, variant_dir

    archive = variant_dir(lock.kernels[0], VARIANT, hub_cache_dir()) / _archive(lock)
    _flip(archive)
    verified = cli("verify", "--cache", "--json", cwd=project)
    cache = next(c for c in json.loads(verified.output)["checks"] if c["name"] == "cache")
    assert verified.exit_code != 0 and any(_archive(lock) in p["message"] for p in cache["problems"])
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(IntegrityError, match=_archive(lock).replace(".", r"\.")):
        kernels.get_kernel(ZIPPED, version=1)
    assert not any(name.startswith("_zipped_") for name in sys.modules)  # no member ran


def test_an_archive_replaced_after_the_check_is_refused_when_read(
        hub: TestHub, locked_project: LockedProjectFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes kernlock imports from are the bytes it hashed: an archive swapped between kernlock's check and
    kernels' `_zip_spec` is refused as it is read."""
    from kernlock._internal.store import hub_cache

    project, lock = locked_project([f"{ZIPPED}@v1"], targets=[CPU])
    assert cli("sync", cwd=project).exit_code == 0
    archive = hub_cache.variant_dir(lock.kernels[0], VARIANT, hub_cache.hub_cache_dir()) / _archive(lock)
    original = hub_cache.check_variant

    def check_then_swap(*args, **kwargs):
        original(*args, **kwargs)
        if sys._getframe(1).f_code.co_name == "_import_from_path":  # the check right before kernels imports
            _flip(archive)  # after it, before kernels' _zip_spec reads the archive

    monkeypatch.setattr(hub_cache, "check_variant", check_then_swap)
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(IntegrityError, match="changed after it was verified"):
        kernels.get_kernel(ZIPPED, version=1)
    assert not any(name.startswith("_zipped_") and name in sys.modules and hasattr(sys.modules[name], "add")
                   for name in sys.modules)
