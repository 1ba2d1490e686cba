"""The `fresh` check: do the project's sources still ask for exactly what the lock holds?

The specs of the sources (`[tool.kernlock] kernels`, `[tool.kernels.dependencies]`,
`[tool.kernlock] scan` paths, `use-kernels`) must be exactly the lock's `inputs`,
the configured overrides the lock's override entries, the declared models the
lock's `[[model]]` records (found with the installed Transformers release and its
kernelize mapping), and every configured target locked. No network; like `uv lock --check`. `verify`
reports it; `--locked` (`require_fresh`) refuses a stale lock.
"""

from __future__ import annotations

from kernlock._internal.lockfile.entries import Lockfile
from kernlock._internal.lockfile.target_pins import is_target_pin
from kernlock._internal.project.config import (
    Project,
    expand_aliases,
    load_project,
    project_specs,
    resolving_target,
)
from kernlock._internal.project.groups import group_specs, stale_groups
from kernlock._internal.project.workspace import Workspace
from kernlock._internal.rules.findings import CheckResult
from kernlock._internal.spec.kernel_spec import KernelSpec, parse_spec
from kernlock._internal.spec.target import Target, parse_target
from kernlock._internal.wording import plural
from kernlock.errors import StaleLockError, TargetError, TrustError, UsageError


def _resolving_target(project: Project, lock: Lockfile) -> Target | None:
    """Whose Transformers defaults expand aliases: this environment, else the first declared
    target."""
    return resolving_target(tuple(sorted({*map(parse_target, project.targets), *lock.targets})))


def _project_specs(project: Project, lock: Lockfile) -> list[KernelSpec]:
    """The project's specs, aliases expanded the way `kernlock lock` expands them."""
    found = project_specs(project)
    if not any(spec.alias for spec in found):
        return found
    target = _resolving_target(project, lock)
    if target is None:
        raise TargetError(
            "cannot expand flash_attention_N without a target",
            fix="declare the targets in [tool.kernlock] targets of pyproject.toml",
        )
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
        context = {
            "spec": key,
            "file": origin.where if origin else None,
            "line": origin.line if origin else None,
        }
        old = removed_by_repo.get(spec.repo, [])
        if len(old) == 1 and old[0] not in changed:
            changed.add(old[0])
            result.problem(
                f"{where}{spec.text} changed: the lock has {old[0]}, the sources ask for {key}",
                "kernlock lock",
                was=old[0],
                **context,
            )
        else:
            result.problem(f"{where}{spec.text} is not in the lock", "kernlock lock", **context)
    for key in removed:
        if key not in changed:
            result.problem(
                f"{key} is locked but no longer named by any source", "kernlock lock", spec=key
            )
    _check_overrides(project, lock, result)
    grouped = expand_aliases(group_specs(project.groups, "", {}), _resolving_target(project, lock))
    found = [*specs, *(parse_spec(k.spec) for k in lock.kernels if k.used_by)]  # models' too
    for problem in stale_groups(lock, project.groups, grouped, found):
        result.problem(problem, "kernlock lock")
    _check_cooldown(project, lock, result)
    _check_models(project, lock, result)
    for _repo, message, fix in allowlist_problems(project, lock):
        result.problem(message, fix)
    for text in project.targets:
        target = parse_target(text)
        if target not in lock.targets:
            result.problem(
                f"target {target} is declared in [tool.kernlock] targets but not locked",
                "kernlock lock",
                target=str(target),
            )
    result.summary = plural(len(by_key), "spec")
    if not added and not removed:
        _note_default_drift(lock, by_key, project, result)


def allowlist_problems(project: Project, lock: Lockfile) -> list[tuple[str, str, str]]:
    """(repo, problem, fix) for each entry locked as `trust = "allowlist"` whose repo
    `[tool.kernlock] trust` does not list."""
    allowed = set(project.trust)
    return [
        (
            kernel.repo,
            f'{kernel.spec} is locked as trust = "allowlist" but {project.pyproject} '
            f"[tool.kernlock] trust does not list {kernel.repo}",
            f"review it and add {kernel.repo!r} to [tool.kernlock] trust, or `kernlock remove "
            f"{kernel.spec}`",
        )
        for kernel in lock.kernels
        if kernel.trust == "allowlist" and kernel.repo not in allowed
    ]


def require_trusted(workspace: Workspace, lock: Lockfile) -> None:
    """`apply()`: raise `TrustError` for an allowlisted entry the project's `trust` does not list.

    For a discovered lock with its project's sources: a lock named explicitly is
    trusted by naming it, as for the owner and permission rules.
    """
    problems = allowlist_problems(workspace.project, lock)
    if problems:
        repo, message, fix = problems[0]
        raise TrustError(f"{workspace.lock_path}: {message}", repo=repo, fix=fix)


def _check_models(project: Project, lock: Lockfile, result: CheckResult) -> None:
    """Declared models ↔ the lock's `[[model]]` records, and the Transformers that found their
    kernels ↔ this one.

    Reads Transformers' version and kernelize mapping source from disk; imports neither torch nor
    Transformers.
    """
    from kernlock._internal.compat.model_kernels import mapping_digest
    from kernlock._internal.compat.transformers import installed_transformers
    from kernlock._internal.project.models import project_models
    from kernlock._internal.spec.devices import device_type

    if not any(device_type(target.backend) for target in lock.targets):
        # models matter only where Transformers kernelizes: no GPU target, no [[model]] records
        return
    declared = {ref.name: ref for ref in project_models(project)}
    locked = {model.name: model for model in lock.models}
    for name in sorted(declared.keys() - locked.keys()):
        origin = declared[name].origin
        result.problem(f"{origin}: model {name} is not in the lock", "kernlock lock", model=name)
    for name in sorted(locked.keys() - declared.keys()):
        result.problem(
            f"model {name} is locked but no longer declared or loaded by scanned code",
            "kernlock lock",
            model=name,
        )
    if not locked:
        return
    info = installed_transformers()
    if info.version is None or info.root is None:
        result.notes.append(
            "the lock's [[model]] kernels cannot be checked against Transformers here: it is not "
            "installed"
        )
        return
    digest = mapping_digest(info.root)
    for model in sorted(locked.values(), key=lambda m: m.name):
        if model.kernel_mapping != digest:
            result.problem(
                f"model {model.name}: transformers {info.version} kernelizes with another mapping "
                f"than transformers {model.transformers}, which found the kernels the lock holds "
                "for it",
                "kernlock lock",
                model=model.name,
                transformers=info.version,
            )
        elif model.transformers != info.version:
            result.problem(
                f"model {model.name}: its kernels were found with transformers "
                f"{model.transformers}, {info.version} is installed (the same kernelize mapping; "
                "its model classes may differ)",
                "kernlock lock",
                model=model.name,
                transformers=info.version,
            )


def _check_overrides(project: Project, lock: Lockfile, result: CheckResult) -> None:
    """Configured overrides ↔ the lock's override entries (added, removed or re-pinned); a value
    that matches no build nor target (a typo) is a problem too."""
    from kernlock._internal.rules.override_values import unmatched_override_value

    typo = unmatched_override_value(project.overrides, lock, project.pyproject.name)
    if typo is not None:
        result.problem(*typo)
    wanted = {
        (rule.when, rule.use, rule.repo)
        for rule in project.overrides
        if any(rule.matches(t) for t in lock.targets)
        and any(rule.repo in k.names() for k in lock.kernels)
    }
    locked = {
        (k.override.when, k.override.use, name)
        for k in lock.kernels
        if k.override is not None and not is_target_pin(k.override)
        for name in k.names()
    }
    for when, use, repo in sorted(wanted - locked):
        result.problem(
            f"override for {repo} ({when} → {use}) is not in the lock", "kernlock lock", spec=repo
        )
    configured = {(when, use) for when, use, _ in wanted}
    for kernel in lock.kernels:
        if (
            kernel.override is not None
            and not is_target_pin(kernel.override)
            and (kernel.override.when, kernel.override.use) not in configured
        ):
            result.problem(
                f"{kernel.spec}: the lock has an override ({kernel.override.when} → "
                f"{kernel.override.use}) that [tool.kernlock.overrides] no longer declares",
                "kernlock lock",
                spec=kernel.spec,
            )


def _check_cooldown(project: Project, lock: Lockfile, result: CheckResult) -> None:
    """`exclude-newer` and `exclude-newer-kernel` ↔ the cut-offs the lock records (a duration
    matches the span it was counted from, whatever the date: no clock is read)."""
    from kernlock._internal.spec.cooldown import format_date

    default, per_repo = project.exclude_newer
    wanted = {"exclude-newer": default, **{f"exclude-newer-kernel {r!r}": c for r, c in per_repo}}
    cut = lock.exclude_newer
    have = {"exclude-newer": (cut.date, cut.span)} if cut and cut.date else {}
    if cut:
        have.update(
            {
                f"exclude-newer-kernel {repo!r}": (date, cut.kernel_span.get(repo))
                for repo, date in cut.kernel_date.items()
            }
        )
    for name in sorted({*have, *(n for n, c in wanted.items() if c is not None)}):
        setting, (date, span) = wanted.get(name), have.get(name, (None, None))
        same = setting is not None and (
            span == setting.span
            if setting.span is not None
            else span is None and setting.date is not None and date == format_date(setting.date)
        )
        if same:
            continue
        recorded = f"{date} ({span})" if span else str(date)
        if setting is None:
            message = f"the lock was resolved under {name} {recorded}, which is no longer set"
        elif date is None:
            message = f"[tool.kernlock] {name} is set, and the lock was resolved without it"
        else:
            message = f"[tool.kernlock] {name} changed: the lock was resolved under {recorded}"
        result.problem(message, "kernlock lock")


def _note_default_drift(
    lock: Lockfile, specs: dict[str, KernelSpec], project: Project, result: CheckResult
) -> None:
    """A note when the installed Transformers would now pick another default version for a bare
    spec."""
    floating = [
        k
        for k in lock.kernels
        if k.spec in specs and specs[k.spec].floating and k.version is not None
    ]
    if not floating:
        return
    from kernlock._internal.compat.transformers import default_version, installed_transformers

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
                f"{kernel.spec}: transformers {installed} would load v{version} by default, the "
                f"lock pins v{kernel.version} (locked with transformers {recorded}); "
                f"kernlock.apply() keeps the lock's pin; `kernlock lock -P {kernel.repo}` takes "
                "the new default"
            )


def require_fresh(workspace: Workspace, lock: Lockfile) -> None:
    """`--locked`: raise `StaleLockError` unless the lock matches the project's sources.

    The sources are read here from `pyproject.toml`, whatever `workspace` read: `apply()`
    and `kernlock run` with a named lock open a workspace without reading them.
    """
    if not workspace.has_sources:
        raise UsageError(
            f"--locked compares the lock with a pyproject.toml and {workspace.root} has none",
            fix="run it in the project directory (or drop --locked)",
        )
    result = CheckResult("fresh")
    check_fresh(load_project(workspace.root), lock, result)
    if result.problems:
        first = result.problems[0]
        more = f" (and {len(result.problems) - 1} more)" if len(result.problems) > 1 else ""
        raise StaleLockError(
            f"{workspace.lock_path} is stale: {first.message}{more}",
            fix=f"run `{first.fix or 'kernlock lock'}`",
        )
