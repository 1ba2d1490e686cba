"""The build a locked entry binds to: the backend a load asks for, kernels' own variant choice
checked against the lock, and the variant fetched into and verified in the cache.

Part of the loader patch (`kernlock._internal.runtime.apply`), which calls these for every locked
load.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kernlock._internal.compat.kernels_api import (
    kernel_metadata,
    kernels_target,
    locked_kernel,
    preferred,
    system_decisions,
    target_decisions,
)
from kernlock._internal.lockfile.entries import LockedKernel
from kernlock._internal.runtime.gpu_arch import remember
from kernlock._internal.runtime.importguard import register as register_verified
from kernlock._internal.runtime.notices import warn_once
from kernlock._internal.runtime.state import BOOK, Binding
from kernlock._internal.spec.target import Target
from kernlock._internal.store.metadata import digest_problem
from kernlock.errors import (
    IntegrityError,
    MissingFilesError,
    NoVariantError,
    VariantMismatchError,
)


def backend_target(bound: Binding, entry: LockedKernel, backend: str | None) -> Target:
    """The locked target a kernels `backend=` argument asks for; any other backend is refused, never
    left to kernels.

    kernels accepts its backend family names (`cuda`, `rocm`, ...) and `cpu`; the
    variant's own spelling (`cu130`) means the same target. `cpu` on a GPU target
    binds to the lock's entry for that target with a CPU backend.
    """
    from kernlock._internal.rules.doctor import backend_name

    target = bound.target
    if backend is None or backend in (target.backend, backend_name(target.backend)):
        return target
    asked = dataclasses.replace(target, backend="cpu") if backend == "cpu" else None
    if asked is None or entry.variant_for(asked) is None:
        variant = entry.variant_for(target)
        assert variant is not None  # find_entry chose the entry covering the bound target
        raise VariantMismatchError(
            f"{entry.spec}: a load with backend={backend!r} asks for a build the lock does not "
            f"record; {bound.path} locks {entry.repo} at {entry.commit[:12]} [{variant.name}] for "
            f"{target}",
            fix=f"`kernlock lock --target {asked}`"
            if asked is not None
            else "drop the backend argument",
        )
    return asked


def _relock_fix(entry: LockedKernel, locked: Target, here: object) -> str:
    """Re-pin the entry where this environment is the locked target already (another Python, a
    kernels that ranks builds otherwise: `lock --target` keeps the pin), else lock this target."""
    if str(here) == str(locked):
        return f"run `kernlock lock -P {entry.repo}`"
    return f"run `kernlock lock --target {here}`"


def locked_local_kernel(
    bound: Binding, entry: LockedKernel, target: Target, backend: str | None
) -> Any:
    """Resolve a locked entry to kernels' `LocalKernel` in the verified cache, for `target`."""
    from kernlock._internal.fetch.download import ensure_variant

    variant = entry.variant_for(target)
    if variant is None:
        raise NoVariantError(
            f"{entry.spec}: no variant locked for {target}",
            fix=f"`kernlock lock --target {target}`",
        )
    names = entry.build_variants or [variant.name]
    decisions = (
        target_decisions(names, target) if bound.simulated else system_decisions(names, backend)
    )
    preferred_name = preferred(decisions)
    if preferred_name != variant.name:
        raise VariantMismatchError(
            f"{entry.spec}: kernels would load {preferred_name or 'no variant'} here, but the lock "
            f"records {variant.name} for {target}; the environment differs from the locked target",
            fix=_relock_fix(entry, target, bound.target if bound.simulated else kernels_target()),
        )
    from huggingface_hub import constants

    from kernlock._internal.fetch.oci_pull import mirror_for

    mirror = mirror_for(bound.lock)  # $KERNLOCK_MIRROR: missing files from there, not the Hub
    root = ensure_variant(
        entry,
        variant,
        offline=bool(constants.HF_HUB_OFFLINE),
        lock=(bound.path, bound.lock),
        fetch=mirror,
    )
    located = locked_kernel(root, entry.repo, entry.commit, variant.name)
    problem = digest_problem(kernel_metadata(located), variant.files, root)
    if problem is not None:  # what kernels 0.18+'s DigestValidator refuses, checked from the lock
        raise IntegrityError(
            f"{entry.spec} {variant.name} at {entry.commit[:12]}: {problem}; refusing to load it, "
            "as kernels 0.18+ does",
            fix=f"pin another revision (`kernlock lock {entry.repo}@<commit>`) or ask the "
            "publisher to rebuild",
        )
    register_verified(entry, variant, root)
    # kernels' ArchValidator asks check_served
    remember(kernel_metadata(located), entry, variant, target)
    return located


def load_locked_build(
    bound: Binding, entry: LockedKernel, target: Target, backend: str | None
) -> Any:
    """`locked_local_kernel`, where a build the lock holds never falls back silently: kernelize
    keeps a layer's own code on `FileNotFoundError`, so a locked build that cannot be loaded (a cold
    offline cache) is an error naming it under strict mode (kernlock's own `MissingFilesError`, with
    its fix, as it is), a warning and a recorded native layer otherwise."""
    try:
        return locked_local_kernel(bound, entry, target, backend)
    except (FileNotFoundError, MissingFilesError) as error:
        if bound.strict and isinstance(error, MissingFilesError):
            raise  # not a FileNotFoundError: kernelize lets it through
        problem = str(error).splitlines()[0] if str(error) else type(error).__name__
        message = (
            f"{entry.spec} ({entry.commit[:12]}) is locked for {target} but its build cannot be "
            f"loaded ({problem}); without it its layers would silently run Transformers' own code"
        )
        if bound.strict:
            raise MissingFilesError(
                message, fix="run `kernlock sync` where the Hub is reachable"
            ) from None
        with BOOK.mutex:
            BOOK.native[entry.repo] = f"locked build not loaded: {problem}"
        warn_once(f"fallback:{entry.spec}", f"kernlock: {message}; running native (lenient mode)")
        raise FileNotFoundError(message) from error
