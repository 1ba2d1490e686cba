"""`kernlock verify` as a library call: is `kernels.lock` valid, fresh, covering and intact?

Checks, in order (later ones run only when the lock parses):

* ``lock``     — the lock parses and validates (errors name the key path or line)
  and is self-consistent (every input and dependency has an entry).
* ``fresh``    — the specs of the project's sources (`[tool.kernlock] kernels`,
  `[tool.kernels.dependencies]`, `[tool.kernlock] scan` paths, `use-kernels`)
  are exactly the lock's `inputs`, and every configured target is locked. No
  network; like `uv lock --check`.
* ``coverage`` — every kernel has a locked variant for each checked target (the
  running environment by default, `targets=...`, or every declared target), and where the builds
  depend on the Python version it is the one kernels loads there (what `apply()` checks).
* ``gpu-archs`` — (when the project declares `[tool.kernlock] gpu-archs`) every locked
  CUDA/ROCm build of every locked or checked target supports each GPU architecture
  declared for it, matched by kernels' own `archs` module (`kernlock._internal.rules.gpu_archs`).
* ``advisories`` — (when `[tool.kernlock] advisories` names any) no locked build is one an advisory
  covers (`kernlock._internal.verify.advisories`); the problem names the advisory and its fix.
* ``doctor``   — this machine can load the locked variants (`kernlock._internal.rules.doctor`: the
  kernels version inside Transformers' window, `kernels-minver`, `python-depends`,
  free-threaded Python, the telemetry/user-agent bug); dirty builds are notes.
* ``cache``    — (opt-in) every locked variant of the checked targets is in the
  local Hub cache and matches the lock's file hashes; its metadata.json lists the locked `archs`.
* ``signatures`` — (opt-in) every cached signed variant of the checked targets: its
  `metadata.json` and bundle are the locked bytes, the bundle verifies against the
  pinned Sigstore root (no network) and names the signer the lock records, and that
  signer (or an unsigned variant) passes the project's policy
  (`kernlock._internal.project.signers`).
* ``against``  — (opt-in) the lock loads exactly what a checkpoint's run recorded in its
  `kernlock.json` (`kernlock._internal.verify.against`).
* ``remote``   — (opt-in) every locked commit still exists on the Hub; branches
  that moved past the lock are reported as notes (not failures); each variant's metadata.json
  there lists the locked `archs`; signed variants'
  bundles, fetched again, still verify and name the locked signer.

Plain verification (``lock``, ``fresh``, ``coverage``, ``doctor``) imports neither Torch,
Transformers, kernels, huggingface_hub nor sigstore; ``gpu-archs``, and ``coverage`` of builds
with a Python part (`cpython-3.13-abi3`), import kernels (not Torch).

The report model and its JSON form are in `kernlock._internal.verify.report`; ``fresh`` is
`kernlock._internal.rules.freshness`, ``coverage`` `kernlock._internal.rules.coverage`, ``remote``
`kernlock._internal.verify.remote`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from kernlock._internal.host import current_target
from kernlock._internal.lockfile.entries import LockedVariant, Lockfile
from kernlock._internal.project.groups import select_groups
from kernlock._internal.project.signers import SigningPolicy, project_policy
from kernlock._internal.project.workspace import open_workspace
from kernlock._internal.rules.coverage import check_coverage
from kernlock._internal.rules.findings import CheckResult
from kernlock._internal.rules.freshness import check_fresh
from kernlock._internal.rules.gpu_archs import check_gpu_archs
from kernlock._internal.spec.target import Target
from kernlock._internal.verify.advisories import check_advisories
from kernlock._internal.verify.against import check_against
from kernlock._internal.verify.remote import check_remote
from kernlock._internal.verify.report import VerifyReport
from kernlock._internal.wording import plural
from kernlock.errors import LockfileError, LockfileNotFoundError, TargetError

if TYPE_CHECKING:
    from kernlock._internal.hub.client import Hub


def check_lock_consistency(lock: Lockfile, result: CheckResult) -> None:
    """Inputs and dependencies that have no `[[kernel]]` entry."""
    specs = {k.spec for k in lock.kernels}
    for key in lock.inputs:
        if key not in specs:
            result.problem(
                f"inputs lists {key} but the lock has no [[kernel]] entry for it",
                "kernlock lock",
                spec=key,
            )
    for kernel in lock.kernels:
        for dep in kernel.depends:
            if dep not in specs:
                result.problem(
                    f"{kernel.spec} depends on {dep}, which the lock does not contain",
                    "kernlock lock",
                    spec=kernel.spec,
                )


def check_doctor(lock: Lockfile, targets: list[Target], result: CheckResult) -> None:
    """This machine can load the locked kernels: kernels version window, minver, Python deps,
    interpreter."""
    from kernlock._internal.project.local_kernels import verify_findings
    from kernlock._internal.project.strict import strict_from_env
    from kernlock._internal.rules.doctor import backend_name, diagnose

    checked = list(targets)
    try:
        if (here := current_target()) not in checked:
            checked.append(here)
    except TargetError:
        pass
    # Each checked target's locked variants, as kernels would validate them at load there:
    # kernels-minver against the installed kernels, python-depends through kernels' mapping for the
    # target's backend.
    seen: set[tuple[str, str]] = set()
    reported: set[tuple[str, str]] = set()
    entries = []
    for target in checked:
        found = [
            (k, v)
            for k in lock.kernels
            if (v := k.variant_for(target)) is not None and (k.spec, v.name) not in seen
        ]
        seen.update((k.spec, v.name) for k, v in found)
        entries += found
        for finding in diagnose(found, backend_name(target.backend)):
            if (finding.message, finding.fix) not in reported:
                reported.add((finding.message, finding.fix))
                result.problem(finding.message, finding.fix)
    for blocking, message, fix in verify_findings(
        {r for k in lock.kernels for r in k.names()}, strict_from_env()
    ):
        if blocking:
            result.problem(message, fix)
        else:
            result.notes.append(message)
    for kernel in lock.kernels:
        for variant in kernel.variants:
            if (
                variant.provenance is not None
                and variant.provenance.dirty
                and any(t in variant.targets for t in targets)
            ):
                result.notes.append(
                    f"{kernel.spec} {variant.name} was built from a dirty tree (its recorded "
                    "source revision does not fully identify it)"
                )
    result.summary = f"{plural(len(entries), 'variant')} for {plural(len(checked), 'target')}"


def check_cache(lock: Lockfile, targets: list[Target], result: CheckResult) -> None:
    """Locked variants of the checked targets are in the Hub cache and match their hashes."""
    from kernlock._internal.store import hub_cache as cache
    from kernlock.errors import MissingFilesError

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
            problems = [
                p
                for p in cache.variant_problems(kernel, variant, directory, stamped=True)
                if not isinstance(p, MissingFilesError)
            ]
            # one problem for them all; `kernlock sync` fetches them unless other files need repair
            if missing:
                names = ", ".join(f.path for f in missing[:3]) + ("…" if len(missing) > 3 else "")
                result.problem(
                    f"{kernel.spec}: {len(missing)} of {len(variant.files)} file(s) of "
                    f"{variant.name} are not in the cache ({names})",
                    "kernlock sync --repair" if problems else "kernlock sync",
                    path=str(directory),
                    **context,
                )
            for problem in problems:
                result.problem(problem.message, problem.fix, path=str(directory), **context)
            digest = None
            # sha256: checked when locked
            if not missing and not problems and variant.digest not in (None, "sha256"):
                from kernlock._internal.store.metadata import cached_digest_problem

                if (digest := cached_digest_problem(directory, variant.files)) is not None:
                    result.problem(
                        f"{kernel.spec} {variant.name} at {kernel.commit[:12]}: {digest}; kernels "
                        "would refuse to load it",
                        f"kernlock lock {kernel.repo}@<another revision>",
                        path=str(directory),
                        **context,
                    )
            if not missing and not problems and (archs := _cached_archs(lock, variant, directory)):
                result.problem(
                    f"{kernel.spec} {archs}",
                    f"kernlock lock -P {kernel.repo}",
                    path=str(directory),
                    **context,
                )
            if (
                not missing
                and not problems
                and digest is None
                and (inert := cache.extra_files(variant, directory, bytecode=True))
            ):
                result.notes.append(
                    f"{kernel.spec}: {directory} holds bytecode caches kernlock never reads "
                    f"({', '.join(inert[:3])}); `kernlock sync --repair` removes them"
                )
    result.summary = f"{plural(len(seen), 'variant')} in {root}"


def _cached_archs(lock: Lockfile, variant: LockedVariant, directory: Path) -> str | None:
    """`archs_problem` for a cached variant whose files match the lock (its metadata.json the
    locked bytes)."""
    from kernlock._internal.store.metadata import archs_problem

    if not any(f.path == "metadata.json" for f in variant.files):
        return None
    try:
        data = (directory / "metadata.json").read_bytes()
    except OSError:
        return None  # checked just before: the cache changed under the check
    return archs_problem(variant, data, lock.version, f"in {directory}")


def check_signatures(
    lock: Lockfile, targets: list[Target], result: CheckResult, policy: SigningPolicy
) -> None:
    """Cached signed variants of the checked targets re-verified offline against the lock's signers
    and the policy."""
    import hashlib

    from kernlock._internal.lockfile.entries import SIGNATURE_FILE
    from kernlock._internal.rules.signatures import recheck, trusted_root_path
    from kernlock._internal.store import hub_cache as cache
    from kernlock.errors import SignatureError

    root, trusted_root, verified = cache.hub_cache_dir(), None, 0
    pairs = {
        (k.spec, v.name): (k, v, t)
        for k in lock.kernels
        for t in targets
        if (v := k.variant_for(t)) is not None
    }
    for kernel, variant, target in pairs.values():
        context = {"kernel": kernel.spec, "variant": variant.name}
        try:
            # a signed one without a signer: recheck says so
            if variant.signature is not None or not variant.signed:
                policy.check(kernel.repo, variant.name, variant.signature)
        except SignatureError as error:
            result.problem(error.message, error.fix, **context)
        if not variant.signed:
            continue
        directory = cache.variant_dir(kernel, variant.name, root)
        read = {}
        for locked in (f for f in variant.files if f.path in ("metadata.json", SIGNATURE_FILE)):
            try:
                data = (directory / locked.path).read_bytes()
            except OSError:
                result.problem(
                    f"{kernel.repo} {variant.name}: {locked.path} is not in the cache "
                    f"({directory})",
                    f"kernlock sync --target {target}",
                    **context,
                )
                continue
            if hashlib.sha256(data).hexdigest() != locked.sha256:
                result.problem(
                    f"{kernel.repo} {variant.name}: {locked.path} in the cache is not the locked "
                    f"file (sha256 {hashlib.sha256(data).hexdigest()}, the lock says "
                    f"{locked.sha256})",
                    f"kernlock sync --repair --target {target}",
                    path=str(directory),
                    **context,
                )
                continue
            read[locked.path] = data
        if len(read) < 2:
            continue
        trusted_root = trusted_root or trusted_root_path(policy.trusted_root)
        problem = recheck(
            kernel.repo, variant, read["metadata.json"], read[SIGNATURE_FILE], trusted_root
        )
        if problem is None:
            verified += 1
        else:
            result.problem(problem[0], problem[1], path=str(directory), **context)
    result.summary = f"{verified} signature{'s' if verified != 1 else ''} verified" + (
        f" against {trusted_root}" if trusted_root else ""
    )


# ---------------------------------------------------------------- entry point


def verify(
    project_dir: str | os.PathLike[str] = ".",
    *,
    targets: Iterable[str] = (),
    all_targets: bool = False,
    cache: bool = False,
    remote: bool = False,
    signatures: bool = False,
    lockfile: str | os.PathLike[str] | None = None,
    against: str | os.PathLike[str] | None = None,
    hub: Hub | None = None,
    groups: Iterable[str] = (),
) -> VerifyReport:
    """Check the project's `kernels.lock`; see the module docstring for the checks and the report.

    `groups` checks only the ungrouped entries and those of these groups (`fresh`: the whole lock).

    Raises `ConfigError`, `SpecError` or `TargetError` (exit 2) for bad configuration or targets;
    an unreadable lock is reported as a failed ``lock`` check with `exit_code` 2.
    """
    workspace = open_workspace(project_dir, lockfile)
    project = workspace.project
    report = VerifyReport(lock_path=workspace.lock_path, root=workspace.root)
    first = CheckResult("lock")
    report.checks.append(first)
    try:
        lock = workspace.read_lock()
    except LockfileNotFoundError as error:
        first.problem(error.message, error.fix)
        report.unreadable = True
        return report
    except LockfileError as error:
        first.problem(error.message, error.fix, key_path=list(error.key_path) or None)
        report.unreadable = True
        return report
    check_lock_consistency(lock, first)
    whole, lock = lock, select_groups(lock, groups, "verify")
    first.summary = f"{plural(len(lock.kernels), 'kernel')}, {plural(len(lock.targets), 'target')}"
    checked = workspace.chosen_targets(lock, targets, all_targets)
    if not targets and not all_targets:
        from kernlock._internal.rules.coverage import simulated_target_note

        if (note := simulated_target_note()) is not None:
            first.notes.append(note)  # the checks below are for that target, not for this machine
    for name, run in (
        (
            "fresh",
            (lambda r: check_fresh(project, whole, r)) if workspace.has_sources else _no_sources,
        ),
        ("coverage", lambda r: check_coverage(lock, checked, r)),
        (
            "gpu-archs",
            (lambda r: check_gpu_archs(lock, checked, project.gpu_archs, r))
            if project.gpu_archs
            else None,
        ),
        ("doctor", lambda r: check_doctor(lock, checked, r)),
        (
            "advisories",
            (lambda r: check_advisories(project, lock, r)) if project.advisories else None,
        ),
        ("cache", (lambda r: check_cache(lock, checked, r)) if cache else None),
        (
            "signatures",
            (lambda r: check_signatures(lock, checked, r, project_policy(project)))
            if signatures
            else None,
        ),
        (
            "remote",
            (lambda r: check_remote(lock, r, hub, project_policy(project).trusted_root))
            if remote
            else None,
        ),
        (
            "against",
            (lambda r: check_against(lock, Path(against), r)) if against is not None else None,
        ),
    ):
        if run is None:
            continue
        result = CheckResult(name)
        run(result)
        report.checks.append(result)
    return report


def _no_sources(result: CheckResult) -> None:
    result.summary = "no pyproject.toml here: not compared with any sources"
