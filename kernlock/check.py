"""`kernlock verify` as a library call: is `kernels.lock` valid, fresh, covering and intact?

Checks, in order (later ones run only when the lock parses):

* ``lock``     — the lock parses and validates (errors name the key path or line)
  and is self-consistent (every input and dependency has an entry).
* ``fresh``    — the specs of the project's sources (`[tool.kernlock] kernels`,
  `[tool.kernels.dependencies]`, `[tool.kernlock] scan` paths, `use-kernels`)
  are exactly the lock's `inputs`, and every configured target is locked. No
  network; like `uv lock --check`.
* ``coverage`` — every kernel has a locked variant for each checked target (the
  running environment by default, `targets=...`, or every declared target).
* ``doctor``   — this machine can load the locked variants (`kernlock.doctor`: the
  kernels version inside Transformers' window, `kernels-minver`, `python-depends`,
  free-threaded Python, the telemetry/user-agent bug); dirty builds are notes.
* ``cache``    — (opt-in) every locked variant of the checked targets is in the
  local Hub cache and matches the lock's file hashes.
* ``remote``   — (opt-in) every locked commit still exists on the Hub; branches
  that moved past the lock are reported as notes (not failures).

Plain verification (``lock``, ``fresh``, ``coverage``, ``doctor``) imports neither Torch,
Transformers, kernels nor huggingface_hub.

The report model and its JSON form are in `kernlock.report`; ``fresh`` is
`kernlock.freshness`, ``coverage`` `kernlock.coverage`, ``remote`` `kernlock.remote`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kernlock.coverage import check_coverage
from kernlock.environment import Target, current_target
from kernlock.errors import LockfileError, LockfileNotFoundError, LockfileVersionError, TargetError
from kernlock.freshness import check_fresh
from kernlock.lockfile import Lockfile
from kernlock.remote import check_remote
from kernlock.report import CheckResult, VerifyReport
from kernlock.workspace import open_workspace

if TYPE_CHECKING:
    from kernlock.hub import Hub


def check_lock_consistency(lock: Lockfile, result: CheckResult) -> None:
    """Inputs and dependencies that have no `[[kernel]]` entry."""
    specs = {k.spec for k in lock.kernels}
    for key in lock.inputs:
        if key not in specs:
            result.problem(f"inputs lists {key} but the lock has no [[kernel]] entry for it",
                           "kernlock lock", spec=key)
    for kernel in lock.kernels:
        for dep in kernel.depends:
            if dep not in specs:
                result.problem(f"{kernel.spec} depends on {dep}, which the lock does not contain",
                               "kernlock lock", spec=kernel.spec)


def check_doctor(lock: Lockfile, targets: list[Target], result: CheckResult) -> None:
    """This machine can load the locked kernels: kernels version window, minver, Python deps, interpreter."""
    from kernlock.doctor import backend_name, diagnose
    from kernlock.local_kernels import verify_findings
    from kernlock.strict import strict_from_env

    entries = []
    backend = "cpu"
    try:
        here = current_target()
        backend = backend_name(here.backend)
        entries = [(k, v) for k in lock.kernels if (v := k.variant_for(here)) is not None]
    except TargetError:
        pass
    for finding in diagnose(entries, backend):
        result.problem(finding.message, finding.fix)
    for blocking, message, fix in verify_findings({r for k in lock.kernels for r in k.names()}, strict_from_env()):
        if blocking:
            result.problem(message, fix)
        else:
            result.notes.append(message)
    for kernel in lock.kernels:
        for variant in kernel.variants:
            if variant.provenance is not None and variant.provenance.dirty and any(
                t in variant.targets for t in targets
            ):
                result.notes.append(f"{kernel.spec} {variant.name} was built from a dirty tree "
                                    "(its recorded source revision does not fully identify it)")
    result.summary = f"{len(entries)} variant{'s' if len(entries) != 1 else ''} for this machine"


def check_cache(lock: Lockfile, targets: list[Target], result: CheckResult) -> None:
    """Locked variants of the checked targets are in the Hub cache and match their hashes."""
    from kernlock import cache
    from kernlock.errors import IntegrityError, MissingFilesError

    root = cache.hub_cache_dir()
    seen: set[tuple[str, str]] = set()
    for kernel in lock.kernels:
        for target in targets:
            variant = kernel.variant_for(target)
            if variant is None or (kernel.spec, variant.name) in seen:
                continue
            seen.add((kernel.spec, variant.name))
            directory = cache.variant_dir(kernel, variant.name, root)
            context = {"kernel": kernel.spec, "variant": variant.name, "target": str(target)}
            missing = cache.missing_files(kernel, variant, directory)
            if missing:
                names = ", ".join(f.path for f in missing[:3]) + ("…" if len(missing) > 3 else "")
                result.problem(f"{kernel.spec}: {len(missing)} of {len(variant.files)} file(s) of {variant.name} "
                               f"are not in the cache ({names})", "kernlock sync", path=str(directory), **context)
                continue
            try:
                cache.check_variant(kernel, variant, directory, stamped=True)
            except MissingFilesError as error:
                result.problem(error.message, error.fix or "kernlock sync", path=str(directory), **context)
            except IntegrityError as error:
                result.problem(error.message, error.fix or "kernlock sync --repair", path=str(directory), **context)
            else:
                if inert := cache.extra_files(variant, directory, bytecode=True):
                    result.notes.append(f"{kernel.spec}: {directory} holds bytecode caches kernlock never reads "
                                        f"({', '.join(inert[:3])}); `kernlock sync --repair` removes them")
    result.summary = f"{len(seen)} variant{'s' if len(seen) != 1 else ''} in {root}"


# ---------------------------------------------------------------- entry point


def verify(
    project_dir: str | os.PathLike[str] = ".",
    *,
    targets: Iterable[str] = (),
    all_targets: bool = False,
    cache: bool = False,
    remote: bool = False,
    lockfile: str | os.PathLike[str] | None = None,
    hub: Hub | None = None,
) -> VerifyReport:
    """Check the project's `kernels.lock`; see the module docstring for the checks and the report.

    Raises `ConfigError`, `SpecError` or `TargetError` (exit 2) for bad configuration or targets;
    an unreadable lock is reported as a failed ``lock`` check with `exit_code` 2.
    """
    workspace = open_workspace(project_dir, lockfile)
    project = workspace.project
    report = VerifyReport(lockfile=workspace.lockfile)
    first = CheckResult("lock")
    report.checks.append(first)
    try:
        lock = workspace.read_lock()
    except LockfileNotFoundError as error:
        first.problem(error.message, error.fix or "kernlock lock")
        report.unreadable = True
        return report
    except LockfileError as error:
        default = None if isinstance(error, LockfileVersionError) else "kernlock lock --upgrade"
        first.problem(error.message, error.fix or default, key_path=list(error.key_path) or None)
        report.unreadable = True
        return report
    check_lock_consistency(lock, first)
    first.summary = f"{len(lock.kernels)} kernels, {len(lock.targets)} targets"
    checked = workspace.chosen_targets(lock, targets, all_targets)
    for name, run in (
        ("fresh", (lambda r: check_fresh(project, lock, r)) if workspace.has_sources else _no_sources),
        ("coverage", lambda r: check_coverage(lock, checked, r)),
        ("doctor", lambda r: check_doctor(lock, checked, r)),
        ("cache", (lambda r: check_cache(lock, checked, r)) if cache else None),
        ("remote", (lambda r: check_remote(lock, r, hub)) if remote else None),
    ):
        if run is None:
            continue
        result = CheckResult(name)
        run(result)
        report.checks.append(result)
    return report


def _no_sources(result: CheckResult) -> None:
    result.summary = "no pyproject.toml here: not compared with any sources"
