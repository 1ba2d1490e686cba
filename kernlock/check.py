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

JSON report (`VerifyReport.to_json()`, `kernlock verify --json`)::

    {
      "ok": bool,                      # every check passed
      "lockfile": str,                 # path of the checked lock
      "checks": [
        {
          "name": "lock" | "fresh" | "coverage" | "doctor" | "cache" | "remote",
          "ok": bool,
          "summary": str,              # e.g. "7 specs", "3 targets"
          "problems": [                # empty when ok
            {"message": str, "fix": str,
             # optional context keys, present where they apply:
             "spec": str, "kernel": str, "target": str, "file": str, "line": int,
             "variant": str, "path": str}
          ],
          "notes": [str]               # informational, never fail the check
        }
      ]
    }

Exit codes (`VerifyReport.exit_code`): 0 all good, 1 a check failed, 2 the lock
is unreadable or invalid.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernlock.environment import Target, current_target, parse_target
from kernlock.errors import (
    LockfileError,
    LockfileNotFoundError,
    LockfileVersionError,
    StaleLockError,
    TargetError,
    UsageError,
)
from kernlock.lockfile import LockedKernel, Lockfile
from kernlock.project import Project, expand_aliases, project_specs
from kernlock.workspace import Workspace, open_workspace
from kernlock.spec import KernelSpec, version_of_branch

if TYPE_CHECKING:
    from kernlock.hub import Hub, Ref

CHECK_NAMES = ("lock", "fresh", "coverage", "doctor", "cache", "remote")


@dataclass
class Problem:
    """One failed expectation and the command that fixes it."""

    message: str
    fix: str
    context: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"message": self.message, "fix": self.fix, **self.context}


@dataclass
class CheckResult:
    """The outcome of one check."""

    name: str
    summary: str = ""
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, message: str, fix: str | None, **context: Any) -> None:
        self.problems.append(Problem(message, fix, {k: v for k, v in context.items() if v is not None}))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "ok": self.ok, "summary": self.summary,
            "problems": [p.to_json() for p in self.problems], "notes": list(self.notes),
        }


@dataclass
class VerifyReport:
    """Every check that ran, in order."""

    lockfile: Path
    checks: list[CheckResult] = field(default_factory=list)
    unreadable: bool = False

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def exit_code(self) -> int:
        if self.unreadable:
            return 2
        return 0 if self.ok else 1

    def check(self, name: str) -> CheckResult | None:
        """The result of the check called `name`, if it ran."""
        return next((c for c in self.checks if c.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "lockfile": str(self.lockfile), "checks": [c.to_json() for c in self.checks]}

    def format(self) -> str:
        """Human-readable report: one line per check, problems indented with their fix."""
        lines = []
        for check in self.checks:
            if check.ok:
                lines.append(f"ok   {check.name}" + (f" ({check.summary})" if check.summary else ""))
            else:
                count = len(check.problems)
                lines.append(f"FAIL {check.name}: {count} problem{'s' if count != 1 else ''}"
                             + (f" ({check.summary})" if check.summary else ""))
            for problem in check.problems:
                lines.append(f"     {problem.message}")
                if problem.fix:
                    lines.append(f"       fix: {problem.fix}")
            for note in check.notes:
                lines.append(f"     note: {note}")
        return "\n".join(lines)


# ---------------------------------------------------------------- targets


def _targets_to_check(workspace: Workspace, lock: Lockfile, targets: Iterable[str], all_targets: bool) -> list[Target]:
    """Explicit targets, else the declared ones (`all_targets`), else the running environment."""
    chosen = [parse_target(t) for t in targets]
    if all_targets:
        chosen.extend(workspace.all_targets(lock))
    if not chosen:
        try:
            chosen.append(current_target())
        except TargetError as error:
            raise TargetError(f"{error} or --all-targets") from None
    return sorted(set(chosen), key=str)


def _resolving_target(project: Project, lock: Lockfile) -> Target | None:
    """Whose Transformers defaults expand aliases: this environment, else the first declared target."""
    try:
        return current_target()
    except TargetError:
        declared = sorted(parse_target(t) for t in (*project.targets, *lock.targets))
        return declared[0] if declared else None


# ---------------------------------------------------------------- checks


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


def _project_specs(project: Project, lock: Lockfile) -> list[KernelSpec]:
    """The project's specs, aliases expanded the way `kernlock lock` expands them."""
    found = project_specs(project)
    if not any(spec.alias for spec in found):
        return found
    target = _resolving_target(project, lock)
    if target is None:
        raise TargetError("cannot expand flash_attention_N without a target; declare [tool.kernlock] targets")
    return expand_aliases(found, target)


def check_fresh(project: Project, lock: Lockfile, result: CheckResult) -> None:
    """Specs of the project's sources ↔ the lock's inputs; declared targets ↔ the lock's targets."""
    specs = _project_specs(project, lock)
    by_key: dict[str, KernelSpec] = {}
    for spec in specs:
        by_key.setdefault(spec.key, spec)
    locked = set(lock.inputs)
    added = sorted(set(by_key) - locked)
    removed = sorted(locked - set(by_key))
    removed_by_repo: dict[str, list[str]] = {}
    for key in removed:
        removed_by_repo.setdefault(key.split("@", 1)[0], []).append(key)
    changed: set[str] = set()
    for key in added:
        spec = by_key[key]
        origin = spec.origin
        where = f"{origin}: " if origin is not None else ""
        context = {"spec": key, "file": origin.where if origin else None, "line": origin.line if origin else None}
        old = removed_by_repo.get(spec.repo, [])
        if len(old) == 1 and old[0] not in changed:
            changed.add(old[0])
            result.problem(f"{where}{spec.text} changed: the lock has {old[0]}, the sources ask for {key}",
                           "kernlock lock", was=old[0], **context)
        else:
            result.problem(f"{where}{spec.text} is not in the lock", "kernlock lock", **context)
    for key in removed:
        if key not in changed:
            result.problem(f"{key} is locked but no longer named by any source", "kernlock lock", spec=key)
    _check_overrides(project, lock, result)
    locked_targets = set(lock.targets)
    for text in project.targets:
        target = str(parse_target(text))
        if target not in locked_targets:
            result.problem(f"target {target} is declared in [tool.kernlock] targets but not locked",
                           "kernlock lock", target=target)
    result.summary = f"{len(by_key)} spec{'s' if len(by_key) != 1 else ''}"
    if not added and not removed:
        _note_default_drift(lock, by_key, project, result)


def _check_overrides(project: Project, lock: Lockfile, result: CheckResult) -> None:
    """Configured overrides ↔ the lock's override entries (added, removed or re-pinned)."""
    targets = [parse_target(t) for t in lock.targets]
    wanted = {
        (rule.when, rule.use, rule.repo)
        for rule in project.overrides
        if any(rule.matches(t) for t in targets) and any(rule.repo in k.names() for k in lock.kernels)
    }
    locked = {
        (k.override.when, k.override.use, name)
        for k in lock.kernels if k.override is not None for name in k.names()
    }
    for when, use, repo in sorted(wanted - locked):
        result.problem(f"override for {repo} ({when} → {use}) is not in the lock", "kernlock lock", spec=repo)
    configured = {(when, use) for when, use, _ in wanted}
    for kernel in lock.kernels:
        if kernel.override is not None and (kernel.override.when, kernel.override.use) not in configured:
            result.problem(f"{kernel.spec}: the lock has an override ({kernel.override.when} → {kernel.override.use}) "
                           "that [tool.kernlock.overrides] no longer declares", "kernlock lock", spec=kernel.spec)


def check_doctor(lock: Lockfile, targets: list[Target], result: CheckResult) -> None:
    """This machine can load the locked kernels: kernels version window, minver, Python deps, interpreter."""
    from kernlock.doctor import backend_name, diagnose
    from kernlock.local_kernels import verify_findings
    from kernlock.patch import STRICT_ENV

    entries = []
    backend = "cpu"
    try:
        here = current_target()
        backend = backend_name(here.backend)
        entries = [(k, v) for k in lock.kernels if (v := k.variant_for(str(here))) is not None]
    except TargetError:
        pass
    for finding in diagnose(entries, backend):
        result.problem(finding.message, finding.fix)
    strict = os.environ.get(STRICT_ENV, "1").lower() not in ("0", "false", "no")
    for blocking, message, fix in verify_findings({r for k in lock.kernels for r in k.names()}, strict):
        if blocking:
            result.problem(message, fix)
        else:
            result.notes.append(message)
    for kernel in lock.kernels:
        for variant in kernel.variants:
            if variant.provenance is not None and variant.provenance.dirty and any(
                t in variant.targets for t in map(str, targets)
            ):
                result.notes.append(f"{kernel.spec} {variant.name} was built from a dirty tree "
                                    "(its recorded source revision does not fully identify it)")
    result.summary = f"{len(entries)} variant{'s' if len(entries) != 1 else ''} for this machine"


def _note_default_drift(lock: Lockfile, specs: dict[str, KernelSpec], project: Project, result: CheckResult) -> None:
    """A note when the installed Transformers would now pick another default version for a bare spec."""
    floating = [k for k in lock.kernels if k.spec in specs and specs[k.spec].floating and k.version is not None]
    if not floating:
        return
    from kernlock.transformers_compat import default_version, installed_transformers

    recorded = lock.resolved_with.get("transformers")
    installed = installed_transformers().version
    if installed is None or recorded == installed:
        return
    target = _resolving_target(project, lock)
    if target is None:
        return
    for kernel in floating:
        version, _ = default_version(kernel.repo, target)
        if version != kernel.version:
            result.notes.append(
                f"{kernel.spec}: transformers {installed} would load v{version} by default, the lock pins "
                f"v{kernel.version} (locked with transformers {recorded}); kernlock.apply() keeps the lock's pin; "
                f"`kernlock lock -P {kernel.repo}` takes the new default"
            )


def buildable(kernel: LockedKernel, target: Target) -> bool:
    """Whether the locked commit has a build kernels would load on `target` (True when the lock does not say)."""
    from kernlock.kernels_adapter import target_decisions

    if not kernel.build_variants:
        return True
    decisions = target_decisions(kernel.build_variants, target)
    return bool(decisions and decisions[0].accepted)


def uncovered_problem(kernel: LockedKernel, target: Target) -> tuple[str, str]:
    """Why `kernel` has no variant for `target`, and the fix that works.

    When the locked commit has no build for the target at all, adding the target
    cannot succeed: the fix is another version (lock-time names one).
    """
    if not buildable(kernel, target):
        return (f"{kernel.spec}: the locked commit {kernel.commit[:12]} has no build for {target} "
                f"(its builds: {', '.join(kernel.build_variants)}); pin a version that has one in its spec",
                f"kernlock explain {kernel.repo} --target {target}")
    return f"{kernel.spec} has no locked variant for target {target}", f"kernlock lock --target {target}"


def check_coverage(lock: Lockfile, targets: list[Target], result: CheckResult) -> None:
    """Each kernel has a locked variant for every checked target."""
    locked_targets = set(lock.targets)
    for target in targets:
        name = str(target)
        kernels = [lock.kernel(spec) for spec in lock.uncovered(name)]
        if name not in locked_targets:  # adding the target is the fix, unless a locked commit has no build for it
            kernels = [k for k in lock.kernels if not buildable(k, target)]
            if not kernels:
                result.problem(f"target {name} is not covered by the lock (locked targets: "
                               f"{', '.join(lock.targets) or 'none'})", f"kernlock lock --target {name}", target=name)
                continue
        for kernel in kernels:
            message, fix = uncovered_problem(kernel, target)
            result.problem(message, fix, kernel=kernel.spec, target=name)
    result.summary = ", ".join(str(t) for t in targets)


def check_cache(lock: Lockfile, targets: list[Target], result: CheckResult) -> None:
    """Locked variants of the checked targets are in the Hub cache and match their hashes."""
    from kernlock import cache
    from kernlock.errors import IntegrityError, MissingFilesError

    root = cache.hub_cache_dir()
    seen: set[tuple[str, str]] = set()
    for kernel in lock.kernels:
        for target in targets:
            variant = kernel.variant_for(str(target))
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
                result.problem(str(error), "kernlock sync", path=str(directory), **context)
            except IntegrityError as error:
                result.problem(str(error), "kernlock sync --repair", path=str(directory), **context)
            else:
                if inert := cache.extra_files(variant, directory, bytecode=True):
                    result.notes.append(f"{kernel.spec}: {directory} holds bytecode caches kernlock never reads "
                                        f"({', '.join(inert[:3])}); `kernlock sync --repair` removes them")
    result.summary = f"{len(seen)} variant{'s' if len(seen) != 1 else ''} in {root}"


# ---------------------------------------------------------------- remote


@dataclass(frozen=True)
class KernelStatus:
    """How a locked kernel compares with its repo's refs on the Hub now."""

    kernel: LockedKernel
    current: str | None          # commit the locked ref points at now (None: no ref, or ref gone)
    ref_kind: str | None         # "branch", "tag" or None
    latest_version: int | None   # highest `vN` branch on the Hub
    error: str | None = None     # the Hub could not be asked
    renamed_to: str | None = None  # the Hub redirects the spec's repo to this name

    @property
    def moved(self) -> bool:
        return self.current is not None and self.current != self.kernel.commit

    @property
    def ref_gone(self) -> bool:
        return self.error is None and self.kernel.ref is not None and self.ref_kind is None

    @property
    def newer_version(self) -> int | None:
        version = self.kernel.version
        if version is None and self.kernel.ref is not None:
            version = version_of_branch(self.kernel.ref)
        if version is not None and self.latest_version is not None and self.latest_version > version:
            return self.latest_version
        return None


def fetch_refs(repos: Iterable[str], hub: Hub) -> dict[str, list[Ref] | str]:
    """Refs of each repo, one request per repo, concurrently; a failure becomes its message."""
    from concurrent.futures import ThreadPoolExecutor

    from kernlock.errors import HubError

    def one(repo: str) -> list[Ref] | str:
        try:
            return hub.refs(repo)
        except HubError as error:
            return str(error)

    repos = sorted(set(repos))
    if not repos:
        return {}
    with ThreadPoolExecutor(max_workers=min(16, len(repos))) as pool:
        return dict(zip(repos, pool.map(one, repos)))


def kernel_statuses(lock: Lockfile, hub: Hub | None = None) -> list[KernelStatus]:
    """Each locked kernel against its repo's current refs."""
    if hub is None:
        from kernlock.hub import Hub

        hub = Hub()
    refs = fetch_refs((spec_repo(k) for k in lock.kernels), hub)
    statuses = []
    for kernel in lock.kernels:
        found = refs[spec_repo(kernel)]
        if isinstance(found, str):
            statuses.append(KernelStatus(kernel, None, None, None, error=found))
            continue
        versions = [v for v in (version_of_branch(r.name) for r in found if r.kind == "branch") if v is not None]
        match = next((r for r in found if r.name == kernel.ref), None) if kernel.ref else None
        canonical = hub.canonical_repo(spec_repo(kernel))
        statuses.append(KernelStatus(
            kernel,
            current=match.commit if match else None,
            ref_kind=match.kind if match else None,
            latest_version=max(versions) if versions else None,
            renamed_to=canonical if canonical != spec_repo(kernel) else None,
        ))
    return statuses


def spec_repo(kernel: LockedKernel) -> str:
    """The repo id as the spec names it (before any rename)."""
    return kernel.spec.split("@", 1)[0]


def check_remote(lock: Lockfile, result: CheckResult, hub: Hub | None = None) -> None:
    """Re-check what the lock claims against the Hub; moved branches are notes.

    Each locked commit must still exist and hold exactly the locked files of every
    locked variant with the locked sizes and sha256 (binaries by their LFS hash,
    small files fetched and hashed); each alias must be a rename the Hub still
    redirects to the locked repo; a "trusted-publisher" entry's publisher must be
    marked trusted on the Hub.
    """
    if hub is None:
        from kernlock.hub import Hub

        hub = Hub()
    statuses = kernel_statuses(lock, hub)
    for status in statuses:
        kernel = status.kernel
        fix = f"kernlock lock -P {kernel.repo}"
        if status.error is not None:
            result.problem(status.error, "check the network, HF_ENDPOINT and HF_TOKEN", kernel=kernel.spec)
            continue
        for problem in remote_problems(kernel, hub):
            result.problem(f"{kernel.spec}: {problem}", fix, kernel=kernel.spec)
        if status.renamed_to is not None:
            result.notes.append(f"{kernel.spec}: {spec_repo(kernel)} was renamed to {status.renamed_to} on the Hub; "
                                f"update the spec (loads keep working under both names)")
        if status.moved:
            result.notes.append(f"{kernel.spec}: {status.ref_kind} {kernel.ref} moved from {kernel.commit[:12]} "
                                f"to {status.current[:12]}; `{fix}` to take it")
        elif status.ref_gone:
            result.notes.append(f"{kernel.spec}: ref {kernel.ref} no longer exists on the Hub (the locked commit does)")
    result.summary = f"{len({s.kernel.repo for s in statuses})} repos"


def remote_problems(kernel: LockedKernel, hub: Hub) -> list[str]:
    """How a lock entry disagrees with the Hub: commit, files and hashes, aliases, trust."""
    import hashlib

    from kernlock.errors import HubError

    try:
        tree = hub.tree(kernel.repo, kernel.commit)
    except HubError as error:
        return [f"locked commit {kernel.commit[:12]} is no longer on the Hub ({error})"]
    problems = []
    for variant in kernel.variants:
        prefix = f"build/{variant.name}/"
        listed = {f.path[len(prefix):]: f for f in tree if f.path.startswith(prefix)}
        if set(listed) != {f.path for f in variant.files}:
            differ = sorted(set(listed) ^ {f.path for f in variant.files})
            problems.append(f"{variant.name} at {kernel.commit[:12]} does not hold the locked files "
                            f"(differs in {', '.join(differ[:3])}{'…' if len(differ) > 3 else ''})")
            continue
        for locked in variant.files:
            entry = listed[locked.path]
            try:
                sha256 = entry.lfs_sha256 or hashlib.sha256(
                    hub.fetch(kernel.repo, kernel.commit, entry.path, entry.blob_id, entry.size)).hexdigest()
            except HubError as error:
                problems.append(f"cannot fetch {entry.path} to check its hash ({error})")
                continue
            if (sha256, entry.size) != (locked.sha256, locked.size):
                problems.append(f"{variant.name}/{locked.path}: the Hub has sha256 {sha256} ({entry.size} bytes), "
                                f"the lock says {locked.sha256} ({locked.size} bytes)")
    for alias in kernel.aliases:
        canonical = hub.canonical_repo(alias)
        if canonical != kernel.repo:
            problems.append(f"alias {alias} is not a rename of {kernel.repo} on the Hub (it is {canonical})")
    if kernel.trust == "trusted-publisher" and not hub.publisher_trusted(kernel.repo.split("/", 1)[0]):
        problems.append(f"the lock says its publisher is trusted, but the Hub does not mark "
                        f"{kernel.repo.split('/', 1)[0]!r} as a trusted kernel publisher")
    return problems


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
        first.problem(str(error), "kernlock lock")
        report.unreadable = True
        return report
    except LockfileError as error:
        first.problem(str(error), None if isinstance(error, LockfileVersionError) else "kernlock lock --upgrade")
        report.unreadable = True
        return report
    check_lock_consistency(lock, first)
    first.summary = f"{len(lock.kernels)} kernels, {len(lock.targets)} targets"
    checked = _targets_to_check(workspace, lock, targets, all_targets)
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


def require_fresh(workspace: Workspace, lock: Lockfile) -> None:
    """`--locked`: raise `StaleLockError` unless the lock matches the project's sources."""
    if not workspace.has_sources:
        raise UsageError(f"--locked compares the lock with a pyproject.toml and {workspace.root} has none; "
                         "run it in the project directory (or drop --locked)")
    result = CheckResult("fresh")
    check_fresh(workspace.project, lock, result)
    if result.problems:
        first = result.problems[0]
        more = f" (and {len(result.problems) - 1} more)" if len(result.problems) > 1 else ""
        raise StaleLockError(f"{workspace.lockfile} is stale: {first.message}{more}; run `{first.fix or 'kernlock lock'}`")


def _no_sources(result: CheckResult) -> None:
    result.summary = "no pyproject.toml here: not compared with any sources"


def report_json(report: VerifyReport) -> str:
    """The report as indented JSON text."""
    return json.dumps(report.to_json(), indent=2)


__all__ = [
    "CHECK_NAMES", "CheckResult", "KernelStatus", "Problem", "VerifyReport",
    "buildable", "check_cache", "check_coverage", "uncovered_problem", "check_fresh", "check_lock_consistency", "check_remote",
    "fetch_refs", "kernel_statuses", "require_fresh", "verify",
]


def project_lock(project_dir: str | os.PathLike[str] = ".", lockfile: str | os.PathLike[str] | None = None) -> tuple[Project, Lockfile]:
    """The project at `project_dir` and its parsed lock (raises `LockfileError`)."""
    workspace = open_workspace(project_dir, lockfile)
    return workspace.project, workspace.read_lock()
