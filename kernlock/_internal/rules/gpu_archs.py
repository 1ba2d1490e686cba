"""GPU architectures as part of coverage: does each locked CUDA/ROCm build support the GPUs it must
run on?

kernels' `ArchValidator` refuses, at the first load, a build whose `backend.archs` do not cover the
device (an A100 against a 9.0-only build). The lock records each variant's archs (`archs`), so this
is decided offline, with kernels' own matching (`compat.kernels_api.arch_covers`):

* `verify` (`check_gpu_archs`): against the architectures the project declares for its targets
  (`[tool.kernlock] gpu-archs`, `kernlock._internal.project.gpu_archs`), before any GPU time;
* `apply()` (`kernlock._internal.runtime.gpu_arch`): against this machine's GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant, Lockfile
from kernlock._internal.lockfile.format_version import format_version
from kernlock._internal.spec.target import Target

if TYPE_CHECKING:
    from kernlock._internal.rules.findings import CheckResult


def unsupported_problem(
    kernel: LockedKernel, variant: LockedVariant, archs: tuple[str, ...], device: str, where: str
) -> tuple[str, str]:
    """The one line (and its fix) for a locked build whose `archs` do not cover `device` (`where`
    names the GPU)."""
    repo = kernel.repo
    return (
        f"{kernel.spec} {variant.name} at {kernel.commit[:12]} is built for GPU archs "
        f"{', '.join(archs)}, which do not cover {where}; kernels would refuse to load it there",
        f"lock a build of {repo} that supports {device} (`kernlock explain {repo}`, then `kernlock "
        f"lock {repo}@<revision>`)",
    )


def check_gpu_archs(
    lock: Lockfile,
    targets: list[Target],
    declarations: tuple[tuple[str, tuple[Any, ...]], ...],
    result: CheckResult,
) -> None:
    """Every locked build of every locked (and checked) GPU target supports each architecture
    declared for it."""
    from kernlock._internal.compat.kernels_api import arch_covers, gpu_family
    from kernlock._internal.project.gpu_archs import declared_archs

    checked = 0
    old_format = format_version(lock.version) < (1, 3)
    for target in sorted({*lock.targets, *targets}, key=str):
        family = gpu_family(target.backend)
        archs = declared_archs(declarations, target, family) if family else []
        for kernel in lock.kernels if archs else ():
            variant = kernel.variant_for(target)
            if variant is None or not kernel.serves(target):
                continue
            if not variant.archs and old_format:
                result.notes.append(
                    f"{kernel.spec} {variant.name}: this lock predates recorded GPU archs; "
                    "`kernlock lock` records them"
                )
                continue
            checked += 1
            for arch in archs:
                if not arch_covers(variant.archs, family or "", arch.arch):
                    message, fix = unsupported_problem(
                        kernel,
                        variant,
                        variant.archs,
                        arch.arch,
                        f"declared GPU arch {arch} of target {target}",
                    )
                    result.problem(
                        message,
                        f"{fix}, or drop {arch.declared!r} from [tool.kernlock] gpu-archs",
                        kernel=kernel.spec,
                        variant=variant.name,
                        target=str(target),
                        arch=arch.arch,
                    )
    from kernlock._internal.wording import plural

    result.summary = f"{plural(checked, 'GPU build')} against the declared gpu-archs"
