"""`kernlock lock` and `kernlock remove` as library calls, each plan → resolve → write: the project
read once into a `RelockPlan` (`kernlock._internal.resolve.plan`), the resolver, an atomic
`kernels.lock`; and where a writer refuses to write (`refuse_overwrite`): over a file that is not a
lock, through a link out of the project, into a directory that does not exist."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from kernlock._internal.hub.client import Hub
from kernlock._internal.lockfile.entries import LOCK_FILENAME, Lockfile, format_for
from kernlock._internal.lockfile.mirror_edit import carry_mirrors
from kernlock._internal.lockfile.serialize import dumps_lockfile, write_lockfile
from kernlock._internal.project.config import Project, expand_aliases
from kernlock._internal.project.groups import group_specs, with_groups
from kernlock._internal.project.pyproject_edit import edit_pyproject, restore_pyproject
from kernlock._internal.project.removals import removal
from kernlock._internal.project.workspace import Workspace, exclusive_workspace
from kernlock._internal.resolve.changes import LockResult, lock_changes
from kernlock._internal.resolve.plan import RelockPlan, names, plan
from kernlock._internal.resolve.request import LockRequest
from kernlock._internal.resolve.resolver import resolver_for
from kernlock._internal.rules.override_values import refuse_unmatched_override_values
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
        mode="check" if check else "write" if write else "dry-run",
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
        planned = plan(workspace, request, recorded=recorded)
        result = write(planned, resolve(planned, hub, progress))
    if notes:
        result = replace(result, warnings=(*notes, *result.warnings))
    rerun = request.arguments()
    if request.mode == "check" and result.changed:
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
        planned = plan(workspace, LockRequest(), project=edited, removals=removals)
        return write(planned, resolve(planned, hub, progress))


@dataclass(frozen=True)
class Resolved:
    """What the resolver made of a plan: the lock to write, why entries moved (by identity) and
    the warnings it gave."""

    lock: Lockfile
    reasons: Mapping[tuple[str, str], str]
    warnings: tuple[str, ...]


def resolve(
    plan: RelockPlan,
    hub: Hub | None = None,
    progress: Callable[[str], None] | None = None,
) -> Resolved:
    """Resolve the plan's specs into the lock to write, with its models, groups and mirrors, and
    refuse an override nothing matches."""
    project, previous = plan.project, plan.previous.lock
    resolver = resolver_for(hub or Hub(), plan.options, previous, progress)
    try:
        result = resolver.resolve(list(plan.specs))
    except TrustError as error:
        if not plan.rerun:
            raise
        raise TrustError.untrusted(error.repo, plan.rerun) from None
    result = replace(
        result,
        models=plan.models,
        version=format_for(result.kernels, plan.models, result.exclude_newer),
    )
    grouped = expand_aliases(group_specs(project.groups, "", {}), plan.options.resolving_target)
    result = with_groups(result, project.groups, grouped, plan.specs)
    # the same pins keep their `[[mirror]]` records: the indexes pushed still hold exactly them
    result = carry_mirrors(previous, result)
    _refuse_unknown_overrides(project, {s.repo for s in plan.specs} | names(result))
    refuse_unmatched_override_values(project.overrides, result, str(project.pyproject))
    return Resolved(result, resolver.reasons, tuple(resolver.warnings))


def write(plan: RelockPlan, resolved: Resolved) -> LockResult:
    """Write the lock and the project edit where the plan writes (the lock held), and say what
    changed; a lock whose pins did not change keeps its bytes."""
    previous, migration, path = plan.previous.lock, plan.previous.migration, plan.path
    result = resolved.lock
    # a migrated JSON lock is replaced whatever its bytes
    existing = None if plan.previous.kind == "migrated" else _existing_text(path)
    if previous is not None and existing is not None:
        # no pin change, no `[resolved-with]` churn
        kept = replace(result, resolved_with=previous.resolved_with)
        if dumps_lockfile(kept) == existing:
            result = kept
    changed = existing is None or dumps_lockfile(result) != existing
    changes = lock_changes(previous, result, resolved.reasons)
    old, new = ({k.spec for k in lock.kernels} if lock else set() for lock in (previous, result))
    written = _write_files(plan, result) if plan.writes else False
    return LockResult(
        lock=result,
        path=path,
        written=written,
        added=tuple(sorted(new - old)),
        removed=tuple(sorted(old - new)),
        updated=tuple(sorted({c.spec for c in changes if c.old and c.new})),
        warnings=(
            *plan.skipped,
            *resolved.warnings,
            *_doctor_warnings(),
            *_dirty_warnings(result),
        ),
        migrated=migration.summary(result) if migration is not None else None,
        changes=changes,
        changed=changed,
    )


def _write_files(plan: RelockPlan, lock: Lockfile) -> bool:
    """Edit `pyproject.toml`, then write the lock (whether its bytes changed); the edit is undone
    when the lock cannot be written."""
    project, edit, path = plan.project, plan.edit, plan.path
    before = (
        project.pyproject.read_bytes() if edit is not None and project.pyproject.is_file() else None
    )
    if edit is not None:
        edit_pyproject(project, edit.additions, edit.removals)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if plan.previous.migration is not None:
            plan.previous.migration.preserve()
        written = write_lockfile(lock, path)
        register(path, lock)  # `kernlock cache` keeps what it names
    # as uv does: pyproject.toml never keeps a spec whose lock was not written
    except BaseException:
        if edit is not None:
            # the disk refuses that too: the lock's own error is the one to say
            with contextlib.suppress(OSError, KernlockError):
                restore_pyproject(project.pyproject, before)
        raise
    return written


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


def refuse_overwrite(
    workspace: Workspace,
    lockfile: str | os.PathLike[str] | None,
    retry: str,
    *,
    creating: bool = True,
) -> None:
    """Refuse a lock path that is an existing file other than a lock (`pyproject.toml`, `train.py`:
    never written over), or, when `creating`, a named lock whose directory does not exist (no
    directories are made for it).

    `lockfile` is the path as the caller named it (None: `$KERNLOCK_LOCKFILE` or the project's);
    `retry` is the command to run again, without it, in the fix.
    """
    import shlex

    from kernlock._internal.lockfile.serialize import foreign_lock_problem
    from kernlock._internal.settings import LOCKFILE_ENV

    path = workspace.lock_path
    if workspace.discovered:
        configured = workspace.project.lockfile_name != LOCK_FILENAME
        how = (
            f"[tool.kernlock] lockfile of {workspace.project.pyproject.name}"
            if configured
            else "default"
        )
        fix = (
            f"set [tool.kernlock] lockfile in {workspace.project.pyproject} to a new "
            f'file such as "{LOCK_FILENAME}"'
            if configured
            else f"move it away (`mv {shlex.quote(str(path))} "
            f"{shlex.quote(str(path) + '.bak')}`) and run `{retry}` again"
        )
    elif lockfile is not None:
        how, fix = (
            f"--lockfile {lockfile}",
            f"leave out --lockfile to write the project's lock: `{retry}`",
        )
    else:
        how, fix = (
            f"${LOCKFILE_ENV}",
            f"unset {LOCKFILE_ENV} to write the project's lock: `env -u {LOCKFILE_ENV} {retry}`",
        )
    problem = foreign_lock_problem(path)
    if problem is not None:
        raise UsageError(
            f"refusing to write the lock over {path} (named by {how}): {problem}; nothing was "
            "written",
            fix=fix,
        )
    if workspace.discovered:
        refuse_link_outside(path, workspace.root, retry)
    if creating:  # a writer may edit pyproject.toml (`lock SPEC`, `remove`)
        refuse_link_outside(workspace.project.pyproject, workspace.root, retry)
    parent = path.parent
    if creating and not workspace.discovered and not os.path.lexists(path) and not parent.is_dir():
        raise UsageError(
            f"refusing to create {path} (named by {how}): its directory {parent} does not exist "
            "and kernlock makes none for a named lock; nothing was written",
            fix=f"create it first (`mkdir -p {shlex.quote(str(parent))}`), or {fix}",
        )


def refuse_link_outside(path: Path, root: Path, retry: str) -> None:
    """Refuse to write through `path`, a project file kernlock found (not one the user named), when
    it is a symlink that resolves outside the project `root`: a committed `kernels.lock ->
    ../other/kernels.lock` would make a lock here replace another project's file. A link within the
    project is written through, as before."""
    import shlex

    if not path.is_symlink():
        return
    target, top = os.path.realpath(path), os.path.realpath(root)
    if target == top or target.startswith(top + os.sep):
        return
    raise UsageError(
        f"refusing to write through {path}: it is a symlink to {target}, outside the project "
        f"{root}, and writing it would replace that file; nothing was written",
        fix="make it a file of the project's own (`cp --remove-destination "
        f"{shlex.quote(target)} {shlex.quote(str(path))}`) and run `{retry}` again",
    )
