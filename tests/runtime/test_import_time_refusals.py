"""Import-time refusals under `apply()`: a backend, a submodule, a variant path or an extension module changed after
the check, or a directory posing as a local kernel, never runs (issue 28)."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import kernels
import pytest

import kernlock
import kernlock._internal.runtime.importguard
from helpers import (
    ACTIVATION,
    FIXTURE_CPU,
    UNIVERSAL,
    LockedProjectFactory,
    clear_loaded_kernels,
    cli,
    kernels_module,
    make_project,
)
from kernlock import load_lockfile
from kernlock.errors import (
    IntegrityError,
    MissingFilesError,
    UnlockedKernelError,
    VariantMismatchError,
)
from kernlock.testing.fixtures import advance_branch, push_build
from kernlock.testing.hub import TestHub
from scripts.harness import variant_of

CU130 = "torch2.13-cxx11-cu130-x86_64-linux"




def test_backend_argument_binds_to_the_locked_target_or_is_refused(
    hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from packaging.version import Version

    CUDA = kernels_module("backends").CUDA

    # simulated targets: the CPU one is CU130's Torch with a CPU backend, whatever Torch runs the suite
    # (named on the command line: a plain lock under another Torch than 2.13 takes a locked target
    # that differs from this machine only in its Torch for an upgrade, and asks to lock this machine)
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"])
    locked = cli("lock", "--target", FIXTURE_CPU, "--target", CU130, cwd=project)
    assert locked.exit_code == 0, locked.output
    lock = load_lockfile(project / "kernels.lock")
    [entry] = lock.kernels
    assert advance_branch(hub.repo_path(ACTIVATION), "v1") != entry.commit
    monkeypatch.setattr(kernels_module("backends"), "_backend", lambda: CUDA(version=Version("13.0")))  # a CUDA 13.0 machine
    kernlock.apply(project / "kernels.lock", target=CU130)
    bound = (entry.commit, entry.variant_for(kernlock._internal.runtime.state.binding().target).name)
    for backend in (None, "cuda", "cu130"):  # kernels' family name and the variant's own spelling
        clear_loaded_kernels()
        identity = kernels.get_kernel(ACTIVATION, version=1, backend=backend).KERNEL_IDENTITY
        assert (identity["commit"], identity["variant"]) == bound, backend
    clear_loaded_kernels()
    identity = kernels.get_kernel(ACTIVATION, version=1, backend="cpu").KERNEL_IDENTITY  # the CPU target's entry
    assert (identity["commit"], identity["variant"]) == (entry.commit, variant_of(lock, entry))
    for backend in ("rocm", "cu128", "xpu"):
        with pytest.raises(VariantMismatchError, match=rf"backend={backend!r}.*locks {ACTIVATION}.*for {CU130}"):
            kernels.get_kernel(ACTIVATION, version=1, backend=backend)


def test_a_submodule_rewritten_after_the_check_is_refused_when_read(locked) -> None:
    project, _, _ = locked
    kernlock.apply(project / "kernels.lock")
    module = kernels.get_kernel(ACTIVATION, version=1)
    variant_dir = Path(module.__file__).parent
    (variant_dir / "layers.py").write_text("RAN = 'unverified'\n")  # rewritten after the load-time check
    del sys.modules[f"{module.__name__}.layers"]  # first read from now on, as a lazy import is
    with pytest.raises(IntegrityError, match=r"layers\.py changed after it was verified \(expected sha256 [0-9a-f]{64}"):
        importlib.import_module(f"{module.__name__}.layers")
    (variant_dir / "lazy.py").write_text("RAN = 'unverified'\n")  # a module added after the check
    with pytest.raises(IntegrityError, match=r"lazy\.py changed after it was verified \(kernels\.lock does not list it"):
        importlib.import_module(f"{module.__name__}.lazy")


def test_a_variant_path_swapped_before_import_is_refused(locked, tmp_path: Path, monkeypatch) -> None:
    project, _, _ = locked
    planted = tmp_path / "planted"

    def register_then_swap(kernel, variant, root: Path) -> None:
        kernlock._internal.runtime.importguard.register(kernel, variant, root)
        shutil.copytree(root, planted)  # another user's copy, whose __init__.py is theirs
        (planted / "__init__.py").write_text("KERNEL_IDENTITY = {'commit': 'planted', 'variant': 'planted'}\n")
        root.rename(root.with_name(root.name + ".verified"))
        root.symlink_to(planted, target_is_directory=True)

    monkeypatch.setattr("kernlock._internal.runtime.locked_build.register_verified", register_then_swap)
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(IntegrityError, match=rf"was verified as .* but now resolves to {planted}; refusing to import it"):
        kernels.get_kernel(ACTIVATION, version=1)


@pytest.mark.parametrize("gone", ["removed", "dangling link"])
def test_a_variant_path_that_no_longer_resolves_before_import_is_refused(locked, tmp_path: Path, monkeypatch,
                                                                          gone: str) -> None:
    """The re-check fails closed: a verified path that now leads nowhere is refused, never skipped."""
    project, _, _ = locked

    def register_then_remove(kernel, variant, root: Path) -> None:
        kernlock._internal.runtime.importguard.register(kernel, variant, root)
        root.rename(tmp_path / "moved-away")
        if gone == "dangling link":
            root.symlink_to(tmp_path / "nowhere", target_is_directory=True)

    monkeypatch.setattr("kernlock._internal.runtime.locked_build.register_verified", register_then_remove)
    kernlock.apply(project / "kernels.lock")
    expected = (MissingFilesError, r"__init__\.py is missing from .*; fix: run `kernlock sync --repair`") if gone == "removed" \
        else (IntegrityError, rf"now resolves to {tmp_path / 'nowhere'}; refusing to import it")
    with pytest.raises(expected[0], match=expected[1]):
        kernels.get_kernel(ACTIVATION, version=1)


def test_a_directory_named_like_an_unlocked_repo_is_not_a_local_kernel(locked, tmp_path: Path, monkeypatch) -> None:
    project, _, _ = locked
    monkeypatch.chdir(tmp_path)
    (tmp_path / UNIVERSAL).mkdir(parents=True)  # a directory in the working directory named like the repo
    monkeypatch.setenv("KERNLOCK_ALLOW_LOCAL", "1")
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(UnlockedKernelError, match=rf"kernel {UNIVERSAL} \(version 1\) is not in"):
        kernels.get_kernel(UNIVERSAL, version=1)


def test_a_locked_file_with_a_long_relative_path_syncs_and_applies(hub: TestHub, locked_project: LockedProjectFactory,
                                                                  tmp_path: Path, monkeypatch) -> None:
    long_name = "data/" + "d" * 140 + "/" + "f" * 60 + ".txt"  # 206 characters under the variant
    push_build(hub.repo_path(UNIVERSAL), "v1", {f"build/torch-universal/{long_name}": b"payload\n"}, "a long path")
    project, lock = locked_project([f"{UNIVERSAL}@v1"])
    assert any(f.path == long_name for f in lock.kernels[0].variant_for(lock.targets[0]).files)
    synced = cli("sync", cwd=project)
    assert synced.exit_code == 0, synced.output
    monkeypatch.setenv("HF_HOME", str(tmp_path / "cold"))  # a cold apply() downloads it too
    kernlock.apply(project / "kernels.lock")
    assert kernels.get_kernel(UNIVERSAL, version=1) is not None


def test_an_extension_module_planted_after_the_check_never_runs(locked, tmp_path: Path) -> None:
    """A lazily imported submodule replaced by an unlisted extension module: refused before dlopen runs its code."""
    import shutil
    import subprocess
    import sysconfig

    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the planted extension")
    marker = tmp_path / "constructor-ran"
    source = tmp_path / "planted.c"
    source.write_text(f'#include <stdio.h>\n__attribute__((constructor)) static void ran(void) '
                      f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    project, _, _ = locked
    kernlock.apply(project / "kernels.lock")
    module = kernels.get_kernel(ACTIVATION, version=1)
    variant_dir = Path(module.__file__).parent
    planted = variant_dir / f"lazyext{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(planted), str(source)], check=True)
    with pytest.raises(IntegrityError, match=r"lazyext\..*\.so changed after it was verified \(kernels\.lock does not list it"):
        importlib.import_module(f"{module.__name__}.lazyext")
    assert not marker.exists()  # its constructor never ran
