"""Attack classes of issue 28 (round 2): each test reproduces one and checks that it is refused or fixed."""

from __future__ import annotations

import pytest

import kernels
import kernlock
from helpers import ACTIVATION, CPU, LockedProjectFactory
from kernlock.patch import VariantMismatchError, release
from kernlock.testing.fixtures import advance_branch
from kernlock.testing.hub import TestHub
from scripts.harness import variant_of

CU130 = "torch2.13-cxx11-cu130-x86_64-linux"


@pytest.fixture(autouse=True)
def _release() -> None:
    yield
    release()


def test_backend_argument_binds_to_the_locked_target_or_is_refused(
    hub: TestHub, locked_project: LockedProjectFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernels.backends import CUDA
    from packaging.version import Version

    project, lock = locked_project([f"{ACTIVATION}@v1"], targets=[CPU, CU130])
    [entry] = lock.kernels
    assert advance_branch(hub.repo_path(ACTIVATION), "v1") != entry.commit
    monkeypatch.setattr("kernels.backends._backend", lambda: CUDA(version=Version("13.0")))  # a CUDA 13.0 machine
    kernlock.apply(project / "kernels.lock", target=CU130)
    locked = (entry.commit, entry.variant_for(kernlock.patch._STATE.target).name)
    for backend in (None, "cuda", "cu130"):  # kernels' family name and the variant's own spelling
        kernels.importer._loaded_kernels.clear()
        identity = kernels.get_kernel(ACTIVATION, version=1, backend=backend).KERNEL_IDENTITY
        assert (identity["commit"], identity["variant"]) == locked, backend
    kernels.importer._loaded_kernels.clear()
    identity = kernels.get_kernel(ACTIVATION, version=1, backend="cpu").KERNEL_IDENTITY  # the CPU target's entry
    assert (identity["commit"], identity["variant"]) == (entry.commit, variant_of(lock, entry))
    for backend in ("rocm", "cu128", "xpu"):
        with pytest.raises(VariantMismatchError, match=rf"backend={backend!r}.*locks {ACTIVATION}.*for {CU130}"):
            kernels.get_kernel(ACTIVATION, version=1, backend=backend)
