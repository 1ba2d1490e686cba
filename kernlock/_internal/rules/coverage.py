"""Coverage: does the lock hold a variant of every kernel for a target, and if not, what fixes it.

`verify` records it (`check_coverage`); `apply()` and `kernlock run` refuse an
uncovered environment with the same diagnosis (`require_coverage`, through `uncovered_problem`).
The fix is always locking the target: that takes a build appended to the locked branch since
(issue 37), records a model's layer kernel as native (issue 43), or refuses naming a version that
has a build.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kernlock._internal.lockfile.entries import LOCK_FILENAME, LockedKernel, Lockfile
from kernlock._internal.spec.target import Target
from kernlock.errors import NoVariantError

if TYPE_CHECKING:  # apply() imports this module; only verify builds reports
    from kernlock._internal.rules.findings import CheckResult


def simulated_target_note() -> str | None:
    """When `$KERNLOCK_TARGET` stands in for a machine it is not (a forged or stale value), the line
    that says so: the lock's builds for that target load here, and this machine may not run them.
    None when unset or it matches."""
    from kernlock._internal.host import current_target
    from kernlock._internal.settings import TARGET_ENV, text
    from kernlock._internal.spec.target import parse_target
    from kernlock.errors import TargetError

    simulated = text(TARGET_ENV)
    if not simulated:
        return None
    try:
        named, detected = parse_target(simulated), current_target()
    # a bad value is refused where it is used; no torch here: nothing to compare with
    except TargetError:
        return None
    if named == detected:
        return None
    return (
        f"${TARGET_ENV}={simulated} stands in for this machine ({detected}): the builds locked for "
        f"{named} load here, and this machine may not run them; unset {TARGET_ENV} to load this "
        "machine's"
    )


def builds(variant_names: Iterable[str], target: Target) -> bool:
    """Whether kernels would load one of `variant_names` on `target`."""
    from kernlock._internal.compat.kernels_api import preferred, target_decisions

    return preferred(target_decisions(variant_names, target)) is not None


def buildable(kernel: LockedKernel, target: Target) -> bool:
    """Whether the locked commit has a build kernels would load on `target` (True when the lock does
    not say)."""
    return not kernel.build_variants or builds(kernel.build_variants, target)


def uncovered_problem(kernel: LockedKernel, target: Target) -> tuple[str, str]:
    """Why `kernel` has no variant for `target`, and the fix that works: locking the target, which
    takes a build appended to the locked branch since, records a model's layer kernel as native
    there, or names a version that has a build."""
    fix = f"kernlock lock --target {target}"
    if kernel.used_by:  # a model brought it in: Transformers keeps the layer's own code without it
        return (
            f"{kernel.spec} (what Transformers loads for model {_models(kernel)}) has no locked "
            f"variant for target {target}; locking the target records its layers as native "
            "where no build exists",
            fix,
        )
    if not buildable(kernel, target):
        return (
            f"{kernel.spec}: the locked commit {kernel.commit[:12]} has no build for {target} "
            f"({len(kernel.build_variants)} builds, none for it); locking the target takes a "
            "build appended to its branch since, or names a version that has one",
            fix,
        )
    return (f"{kernel.spec} has no locked variant for target {target}", fix)


def _models(kernel: LockedKernel) -> str:
    """The models whose layers use `kernel` (`./model`), from its `used-by` lines."""
    return ", ".join(sorted({use.split(": ", 1)[0] for use in kernel.used_by}))


def require_coverage(
    lock: Lockfile, target: Target, lockfile: os.PathLike[str] | str = LOCK_FILENAME
) -> None:
    """Raise `NoVariantError` unless every locked kernel has a variant for `target`."""
    missing = lock.uncovered(target)
    if not missing:
        return
    kernels = [kernel for spec in missing if (kernel := lock.kernel(spec)) is not None]
    # one kernel that needs more than the target added: say why
    if len(kernels) == 1 and (kernels[0].used_by or not buildable(kernels[0], target)):
        message, fix = uncovered_problem(kernels[0], target)
        raise NoVariantError(f"{lockfile}: {message}", fix=f"`{fix}`")
    have = ", ".join(map(str, lock.targets)) or "none"
    named = [f"{k.spec}{f' (model {_models(k)})' if k.used_by else ''}" for k in kernels]
    raise NoVariantError(
        f"{lockfile} has no build variant for this environment ({target}) for "
        f"{', '.join(named)}; locked targets: {have}",
        fix=f"`kernlock lock --target {target}`",
    )


def python_choice_problem(kernel: LockedKernel, target: Target) -> tuple[str, str] | None:
    """What `apply()` refuses at load (`VariantMismatchError`) where the builds depend on the Python
    version: kernels' choice on `target`, with its Python (declared, else this one), is not the
    locked variant. Only names with a Python part (`cpython-3.13-abi3`) import kernels."""
    variant = kernel.variant_for(target)
    if variant is None:
        return None
    names = kernel.build_variants or (variant.name,)
    if not any("-cpython-" in name for name in names):
        return None
    from kernlock._internal.compat.kernels_api import preferred, target_decisions
    from kernlock._internal.host import interpreter

    chosen = preferred(target_decisions(names, target))
    if chosen == variant.name:
        return None
    python, free_threaded = interpreter(target)
    return (
        f"{kernel.spec}: kernels would load {chosen or 'no variant'} on {target} with Python "
        f"{python}{' (free-threaded)' if free_threaded else ''}, but the lock records "
        f"{variant.name}; the lock was written for another Python",
        f"kernlock lock -P {kernel.repo}",
    )


def check_coverage(lock: Lockfile, targets: list[Target], result: CheckResult) -> None:
    """Each kernel has a locked variant for every checked target."""
    for target in targets:
        name = str(target)
        kernels = [
            kernel for spec in lock.uncovered(target) if (kernel := lock.kernel(spec)) is not None
        ]
        # adding the target is the fix, unless a locked commit has no build for it
        if target not in lock.targets:
            kernels = [k for k in lock.kernels if k.serves(target) and not buildable(k, target)]
            if not kernels:
                result.problem(
                    f"target {name} is not covered by the lock (locked targets: "
                    f"{', '.join(map(str, lock.targets)) or 'none'})",
                    f"kernlock lock --target {name}",
                    target=name,
                )
                continue
        for kernel in kernels:
            message, fix = uncovered_problem(kernel, target)
            result.problem(message, fix, kernel=kernel.spec, target=name)
        for kernel in lock.kernels:
            if (mismatch := python_choice_problem(kernel, target)) is not None:
                result.problem(*mismatch, kernel=kernel.spec, target=name)
            native = kernel.native_reason(target)
            if native is not None:
                result.note(
                    f"{kernel.spec} is native on {name} ({native}): "
                    f"{', '.join(kernel.used_by) or 'its layers'} keep Transformers' own code",
                    kernel=kernel.spec,
                    target=name,
                    rule="native-fallback",
                )
    result.summary = ", ".join(str(t) for t in targets)


def uncovered_machine(lock: Lockfile) -> tuple[str, str] | None:
    """After a plain `kernlock lock`: why the lock leaves this machine (`machine_target()`)
    uncovered, and the fix, where it looks like an oversight: `$KERNLOCK_TARGET` names the machine,
    or a locked target differs from it only in its Torch version (Torch was upgraded). None when
    covered, or when this machine is another kind than every locked target (a declared choice)."""
    from dataclasses import replace

    from kernlock._internal.host import machine_target
    from kernlock._internal.settings import TARGET_ENV, text
    from kernlock.errors import TargetError

    try:
        here = machine_target()
    except TargetError:
        return None
    missing = lock.uncovered(here) if here not in lock.targets else []
    upgraded = [t for t in lock.targets if replace(t, torch=here.torch) == here]
    if not missing or not (text(TARGET_ENV) or upgraded):
        return None
    why = f"${TARGET_ENV}" if text(TARGET_ENV) else "the installed Torch"
    return (
        f"the lock does not cover this machine ({here}, from {why}): it locks "
        f"{', '.join(map(str, lock.targets)) or 'no target'}, so {', '.join(missing)} have no "
        "locked variant here",
        f"kernlock lock --target {here}",
    )
