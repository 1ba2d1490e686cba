"""Under `apply()`, a locked build that does not support this GPU is refused with one line, before
it loads.

kernels' `ArchValidator` would raise its own RuntimeError at the first load (often the first
forward, through kernelize). kernlock refuses first, as `GpuArchError` (a `RuntimeError` too, so
`has_kernel` still answers False), naming the spec, variant, commit, the build's archs and this
device:

* at `apply()`, for every locked variant of the bound target, when Torch has already initialised the
  GPU (kernlock never initialises it there: a process may fork first);
* at each load of a locked variant, in kernels' `ArchValidator` (so `check_arch=False` skips it, as
  it skips kernels' check), from the served variant's verified `metadata.json`.

The matching is kernels' own (`compat.kernels_api.arch_covers`), the device is read as kernels reads
it.
"""

from __future__ import annotations

import sys
from typing import Any

from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant, Lockfile
from kernlock._internal.spec.target import Target
from kernlock.errors import GpuArchError

_served: dict[
    int, tuple[Any, LockedKernel, LockedVariant, Target]
] = {}  # id(metadata) -> (metadata, entry, ...)


def _refusal(
    kernel: LockedKernel, variant: LockedVariant, archs: tuple[str, ...], family: str, device: str
) -> GpuArchError:
    from kernlock._internal.rules.gpu_archs import unsupported_problem

    what = f"this GPU (CUDA capability {device})" if family == "cuda" else f"this GPU ({device})"
    message, fix = unsupported_problem(kernel, variant, archs, device, what)
    return GpuArchError(message, fix=f"{fix}, or run on a GPU it supports")


def _check(
    kernel: LockedKernel, variant: LockedVariant, archs: tuple[str, ...], target: Target
) -> None:
    from kernlock._internal.compat.kernels_api import arch_covers, device_arch, gpu_family

    family = gpu_family(target.backend)
    if family is None or not archs:
        return
    device = device_arch(family)
    if device is not None and not arch_covers(archs, family, device):
        raise _refusal(kernel, variant, archs, family, device)


def remember(metadata: Any, kernel: LockedKernel, variant: LockedVariant, target: Target) -> None:
    """kernlock hands kernels `metadata` for this locked variant, bound for `target` (checked by
    `check_served`)."""
    _served[id(metadata)] = (metadata, kernel, variant, target)


def check_served(metadata: Any, variant_name: str) -> None:
    """The `ArchValidator` hook: refuse a variant kernlock served whose archs do not cover this
    GPU."""
    served = _served.get(id(metadata))
    if served is None or served[0] is not metadata or served[2].name != variant_name:
        # not a locked build (a local kernel, an unlocked lenient load): kernels checks it alone
        return
    from kernlock._internal.compat.kernels_api import metadata_archs

    _, kernel, variant, target = served
    # the verified metadata.json: older locks too
    _check(kernel, variant, metadata_archs(metadata), target)


def require_device_archs(lock: Lockfile, target: Target) -> None:
    """At `apply()`: refuse when a locked variant of `target` does not support this GPU, if Torch
    initialised one."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return
    for kernel in lock.kernels:
        variant = kernel.variant_for(target)
        if variant is not None and kernel.serves(target):
            _check(kernel, variant, variant.archs, target)
