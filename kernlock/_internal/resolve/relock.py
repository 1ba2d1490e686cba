"""`kernlock lock` and `kernlock remove` as library calls: sources → resolver → atomic
`kernels.lock`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from kernlock._internal.hub.client import Hub
from kernlock._internal.lockfile.entries import Lockfile, format_for
from kernlock._internal.lockfile.kernels_json import migration_for
from kernlock._internal.lockfile.mirror_edit import carry_mirrors
from kernlock._internal.lockfile.serialize import dumps_lockfile, write_lockfile
from kernlock._internal.project.advisory_sources import project_advisories
from kernlock._internal.project.config import (
    Project,
    collect_specs,
    expand_aliases,
    project_targets,
    resolving_target,
)
from kernlock._internal.project.gpu_archs import declared_capabilities
from kernlock._internal.project.groups import group_specs, with_groups
from kernlock._internal.project.models import project_models
from kernlock._internal.project.pyproject_edit import edit_pyproject, relative_to, restore_pyproject
from kernlock._internal.project.removals import removal
from kernlock._internal.project.signers import project_policy
from kernlock._internal.project.workspace import Workspace, exclusive_workspace
from kernlock._internal.resolve.changes import LockResult, lock_changes
from kernlock._internal.resolve.cooldown import changed_cutoffs, request_cutoffs
from kernlock._internal.resolve.guards import refuse_overwrite
from kernlock._internal.resolve.models import model_kernels
from kernlock._internal.resolve.options import ResolveOptions
from kernlock._internal.resolve.request import LockRequest
from kernlock._internal.resolve.resolver import resolver_for
from kernlock._internal.rules.override_values import refuse_unmatched_override_values
from kernlock._internal.spec.kernel_spec import RECORDED, KernelSpec, Origin, parse_spec
from kernlock._internal.spec.target import parse_target
from kernlock._internal.store.registry import register
from kernlock.errors import KernlockError, StaleLockError, TrustError, UsageError

REASONS = ("branch moved", "upgraded", "added", "removed", "override", "re-verified")
# Besides these, a per-target pin (`kernlock._internal.lockfile.target_pins`) gives its own reason
# ("build appended at <commit>",
# an advisory's), and the resolver names a move it made ("moved to <commit>: builds appended, locked
# variants unchanged").


def lock(
    project_dir: str | os.PathLike[str] = ".",
    specs: Iterable[str] = (),
    *,
    targets: Iterable[str] = (),
    scan: Iterable[str] = (),
    models: Iterable[str] = (),
    upgrade: bool = False,
    upgrade_kernels: Iterable[str] = (),
    all_variants: bool = False,
    trust: Iterable[str] = (),
    lockfile: str | os.PathLike[str] | None = None,
    write: bool = True,
    check: bool = False,
    migrate: bool = False,
    exclude_newer: str | None = None,
    progress: Callable[[str], None] | None = None,
    hub: Hub | None = None,
) -> LockResult:
    """Resolve the project's kernel specs and write `kernels.lock` (and record new sources in
    `pyproject.toml`).

    Existing pins are kept unless `upgrade` (all) or `upgrade_kernels` (those
    repos) asks otherwise; a re-lock that changes nothing leaves the lock's bytes
    as they are. `write=False` writes nothing; `check` also writes nothing and raises
    `StaleLockError` when the lock would change. A kernels JSON lock at the path is
    converted only with `migrate` (its commits become pins; see
    `kernlock._internal.lockfile.kernels_json`). `exclude_newer` (`"7 days"`, a date) replaces
    the project's cooldown settings (`kernlock._internal.resolve.cooldown`). On any error the
    previous lock is left untouched. (`kernlock lock --record -- CMD` is `lock_request` with the
    specs CMD loaded.)
    """
    request = LockRequest(
        project_dir=project_dir,
        specs=tuple(specs),
        targets=tuple(targets),
        scan=tuple(scan),
        models=tuple(models),
        upgrade=upgrade,
        upgrade_kernels=tuple(upgrade_kernels),
        all_variants=all_variants,
        trust=tuple(trust),
        lockfile=lockfile,
        write=write,
        check=check,
        migrate=migrate,
        exclude_newer=exclude_newer,
    )
    return lock_request(request, progress=progress, hub=hub)


def lock_request(
    request: LockRequest,
    *,
    recorded: tuple[str, ...] = (),
    notes: tuple[str, ...] = (),
    progress: Callable[[str], None] | None = None,
    hub: Hub | None = None,
) -> LockResult:
    """`lock()` for a `LockRequest` (what `kernlock lock` builds from its options).

    `recorded` are the specs of the kernels the run of `request.record` loaded
    (`kernlock._internal.runtime.record_run`), locked too and kept in `[tool.kernlock]
    recorded`; `notes` are that run's warnings, reported with the lock's.
    """
    with exclusive_workspace(request.project_dir, request.lockfile) as workspace:
        refuse_overwrite(workspace, request.lockfile, request.retry(), creating=request.writes)
        result = _relock(
            workspace, workspace.project, request, recorded=recorded, progress=progress, hub=hub
        )
    if notes:
        result = replace(result, warnings=(*notes, *result.warnings))
    rerun = request.arguments()
    if request.check and result.changed:
        what = (
            ", ".join(change.describe() for change in result.changes)
            or "its content would be rewritten"
        )
        raise StaleLockError(
            f"{result.path} is out of date: {what}",
            fix=f"run `kernlock lock{' ' + rerun if rerun else ''}`",
        )
    return result


def remove(
    project_dir: str | os.PathLike[str] = ".",
    specs: Iterable[str] = (),
    *,
    lockfile: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    hub: Hub | None = None,
    group: str | None = None,
) -> LockResult:
    """Drop specs from `[tool.kernlock] kernels` / `recorded` / `[tool.kernels.dependencies]` and
    every `[tool.kernlock.groups]` group (with `group`: from that group only) and re-lock, keeping
    other pins (`kernlock._internal.project.removals` says how a spec matches).

    Nothing is written unless the re-lock succeeds.
    """
    import shlex

    specs = tuple(specs)
    where = ["--project", str(project_dir)] if str(project_dir) != "." else []

    def rerun(names: Iterable[str], in_group: str | None) -> str:
        chosen = ["--group", in_group] if in_group else []
        return shlex.join(["kernlock", "remove", *names, *chosen, *where])

    with exclusive_workspace(project_dir, lockfile) as workspace:
        refuse_overwrite(workspace, lockfile, rerun(specs, group))
        edited, removals = removal(workspace.project, specs, group, rerun)
        return _relock(
            workspace, edited, LockRequest(), removals=removals, progress=progress, hub=hub
        )


def _relock(
    workspace: Workspace,
    project: Project,
    request: LockRequest,
    *,
    removals: dict[str, list[str]] | None = None,
    recorded: tuple[str, ...] = (),
    progress: Callable[[str], None] | None = None,
    hub: Hub | None = None,
) -> LockResult:
    """Resolve `project`'s sources plus `request.specs` (and the `recorded` specs of a
    `--record` run) and write the lock and the pyproject edits (lock held).

    `request.arguments()` is repeated in a refusal's fix.
    """
    cli_specs, targets, scan, models = (
        list(request.specs),
        request.targets,
        request.scan,
        request.models,
    )
    trust, upgrade_kernels, rerun = request.trust, request.upgrade_kernels, request.arguments()
    path = workspace.lock_path
    migration = migration_for(path, request.migrate)
    previous = (
        migration.as_previous_lock()
        if migration is not None
        else workspace.previous_lock(request.upgrade)
    )
    target_list = project_targets(project, targets)
    resolving = resolving_target(target_list)
    skipped: list[str] = []
    all_specs = collect_specs(project, cli_specs, scan, resolving, skipped)
    # a recorded spec that no source names yet is kept in [tool.kernlock] recorded
    new_recorded = _new_recorded(all_specs, recorded)
    all_specs += [parse_spec(text, Origin(RECORDED)) for text in new_recorded]
    declared = replace(
        project, models=(*project.models, *(m for m in models if m not in project.models))
    )
    model_specs, model_records = model_kernels(
        project_models(declared, scan),
        target_list,
        workspace.root,
        [spec.text for spec in all_specs],
        declared_capabilities(project.gpu_archs, target_list),
    )
    all_specs += model_specs
    if not all_specs and not model_records and not removals:
        raise KernlockError(
            "no kernel specs found",
            fix="pass one (kernlock lock org/repo), list them in [tool.kernlock] kernels, "
            "or point [tool.kernlock] scan at your training code",
        )
    _refuse_unknown_upgrades(upgrade_kernels, {s.repo for s in all_specs} | _names(previous), rerun)
    cutoffs = request_cutoffs(project, request, previous)
    options = ResolveOptions(
        targets=target_list,
        all_variants=request.all_variants,
        trust_allowlist=frozenset((*project.trust, *trust)),
        upgrade_all=request.upgrade,
        upgrade=frozenset(upgrade_kernels) | changed_cutoffs(previous, cutoffs),
        resolving_target=resolving,
        overrides=project.overrides,
        signing=project_policy(project),
        advisories=project_advisories(project)[0],  # less those ignored for now
        exclude_newer=cutoffs,
    )
    resolver = resolver_for(hub or Hub(), options, previous, progress)
    try:
        result = resolver.resolve(all_specs)
    except TrustError as error:
        if not rerun:
            raise
        raise TrustError.untrusted(error.repo, rerun) from None
    result = replace(
        result,
        models=model_records,
        version=format_for(result.kernels, model_records, result.exclude_newer),
    )
    grouped = expand_aliases(group_specs(project.groups, "", {}), resolving)
    result = with_groups(result, project.groups, grouped, all_specs)
    # the same pins keep their `[[mirror]]` records: the indexes pushed still hold exactly them
    result = carry_mirrors(previous, result)
    _refuse_unknown_overrides(project, {s.repo for s in all_specs} | _names(result))
    refuse_unmatched_override_values(project.overrides, result, str(project.pyproject))
    existing = _existing_text(path) if migration is None else None
    if previous is not None and existing is not None:
        # no pin change, no `[resolved-with]` churn
        kept = replace(result, resolved_with=previous.resolved_with)
        if dumps_lockfile(kept) == existing:
            result = kept
    changed = existing is None or dumps_lockfile(result) != existing
    changes = lock_changes(previous, result, resolver.reasons)
    old, new = ({k.spec for k in lock.kernels} if lock else set() for lock in (previous, result))
    written = False
    if request.writes:
        configured = {str(parse_target(t)) for t in project.targets}
        additions = {
            "kernels": [s for s in cli_specs if s not in project.kernels],
            "targets": [str(t) for t in target_list if str(t) not in configured] if targets else [],
            "scan": [
                p for p in (relative_to(workspace.root, p) for p in scan) if p not in project.scan
            ],
            "models": [m for m in models if m not in project.models],
            "trust": [r for r in trust if r not in project.trust],
            "recorded": list(new_recorded),
        }
        edited = any(additions.values()) or bool(removals)
        before = project.pyproject.read_bytes() if edited and project.pyproject.is_file() else None
        if edited:
            edit_pyproject(project, additions, removals)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if migration is not None:
                migration.preserve()
            written = write_lockfile(result, path)
            register(path, result)  # `kernlock cache` keeps what it names
        # as uv does: pyproject.toml never keeps a spec whose lock was not written
        except BaseException:
            if edited:
                # the disk refuses that too: the lock's own error is the one to say
                with contextlib.suppress(OSError, KernlockError):
                    restore_pyproject(project.pyproject, before)
            raise
    return LockResult(
        lock=result,
        path=path,
        written=written,
        added=tuple(sorted(new - old)),
        removed=tuple(sorted(old - new)),
        updated=tuple(sorted({c.spec for c in changes if c.old and c.new})),
        warnings=(*skipped, *resolver.warnings, *_doctor_warnings(), *_dirty_warnings(result)),
        migrated=migration.summary(result) if migration is not None else None,
        changes=changes,
        changed=changed,
    )


def _new_recorded(specs: list[KernelSpec], recorded: tuple[str, ...]) -> list[str]:
    """The recorded specs whose key none of `specs` (the project's sources) has."""
    known = {spec.key for spec in specs}
    return [text for text in recorded if parse_spec(text).key not in known]


def _names(lock: Lockfile | None) -> set[str]:
    """Every repo name a lock's entries answer to (canonical names and aliases)."""
    return {name for kernel in (lock.kernels if lock else ()) for name in kernel.names()}


def _refuse_unknown_upgrades(upgrade_kernels: tuple[str, ...], known: set[str], rerun: str) -> None:
    """`-P REPO` naming no kernel of the project (a typo would otherwise re-resolve nothing and say
    "unchanged")."""
    import shlex

    from kernlock._internal.project.suggest import close_repo, known_list

    for name in upgrade_kernels:
        if name in known:
            continue
        match = close_repo(name, known)
        words = shlex.split(rerun)
        fixed = [
            match if match and word == name and index and words[index - 1] == "-P" else word
            for index, word in enumerate(words)
        ]
        raise UsageError(
            f"-P {name}: no kernel of this project is named so (it has {known_list(known)}); "
            "nothing was changed" + (f"; did you mean {match}?" if match else ""),
            fix=f"`kernlock lock {shlex.join(fixed)}`"
            if match
            else "name a repo `kernlock show` lists",
        )


def _refuse_unknown_overrides(project: Project, known: set[str]) -> None:
    """An override keyed to a repo nothing declares or depends on (a typo would otherwise be
    ignored)."""
    from kernlock._internal.project.suggest import close_repo, known_list

    for rule in project.overrides:
        if rule.repo in known:
            continue
        match = close_repo(rule.repo, known)
        raise UsageError(
            f'{project.pyproject}: [tool.kernlock.overrides."{rule.repo}"] names no '
            f"kernel of the project (it has {known_list(known)}); nothing was changed"
            + (f"; did you mean {match}?" if match else ""),
            fix=f"key the override by {match!r} in {project.pyproject.name}"
            if match
            else f"declare {rule.repo} in [tool.kernlock] kernels, or remove its override",
        )


def _doctor_warnings() -> list[str]:
    """A warning when the stack that resolved the lock is one the compatibility doctor rejects."""
    from kernlock._internal.rules.doctor import installed_stack_finding

    finding = installed_stack_finding()
    if finding is None:
        return []
    return [
        "locked from an environment the compatibility doctor rejects (`kernlock verify` fails "
        f"here): {finding.message}; fix: {finding.fix}"
    ]


def _dirty_warnings(lock: Lockfile) -> list[str]:
    """kernels' `DirtyValidator` warning at every load of a build from a dirty tree, given once when
    locking it."""
    warnings = []
    for kernel in lock.kernels:
        for variant in kernel.variants:
            if variant.provenance is not None and variant.provenance.dirty:
                sources = [
                    name
                    for name, dirty in (
                        ("kernel source", variant.provenance.source_dirty),
                        ("kernel-builder", variant.provenance.builder_dirty),
                    )
                    if dirty
                ]
                warnings.append(
                    f"{kernel.spec} {variant.name} was built from a dirty git tree "
                    f"({' and '.join(sources)} had uncommitted changes): its recorded revision "
                    "does not fully identify its sources (`kernlock show --provenance`)"
                )
    return warnings


def _existing_text(path: Path) -> str | None:
    """The lock file's text as it is, or None when there is none (or it is not text)."""
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
