"""A re-lock's plan: everything `lock()` and `remove()` read of the project, the request and the
previous lock before anything is resolved, held as one frozen `RelockPlan`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from kernlock._internal.lockfile.entries import LockedModel, Lockfile
from kernlock._internal.lockfile.kernels_json import Migration, migration_for
from kernlock._internal.project.advisory_sources import project_advisories
from kernlock._internal.project.config import (
    Project,
    collect_specs,
    project_targets,
    resolving_target,
)
from kernlock._internal.project.gpu_archs import declared_capabilities
from kernlock._internal.project.models import project_models
from kernlock._internal.project.pyproject_edit import relative_to
from kernlock._internal.project.signers import project_policy
from kernlock._internal.project.workspace import Workspace
from kernlock._internal.resolve.cooldown import changed_cutoffs, request_cutoffs
from kernlock._internal.resolve.models import model_kernels
from kernlock._internal.resolve.request import LockRequest, ResolveOptions
from kernlock._internal.spec.kernel_spec import RECORDED, KernelSpec, Origin, parse_spec
from kernlock._internal.spec.target import Target, parse_target
from kernlock.errors import KernlockError, UsageError


@dataclass(frozen=True)
class PreviousLock:
    """The lock a re-lock replaces: none, kernlock's own, or kernels' JSON lock being migrated (its
    pins as a lock, `lock`, and the file to keep, `migration`)."""

    kind: Literal["none", "lock", "migrated"]
    lock: Lockfile | None = None
    migration: Migration | None = None


@dataclass(frozen=True)
class ProjectEdit:
    """What a written lock records in `pyproject.toml` (`edit_pyproject`'s additions and
    removals)."""

    additions: dict[str, list[str]]
    removals: dict[str, list[str]] | None = None

    @property
    def changes(self) -> bool:
        """Whether the edit touches `pyproject.toml` at all."""
        return any(self.additions.values()) or bool(self.removals)


@dataclass(frozen=True)
class RelockPlan:
    """One re-lock, decided: what to resolve and how, where the lock goes, and the project edit
    (None when there is none, or nothing is written)."""

    path: Path
    project: Project
    previous: PreviousLock
    specs: tuple[KernelSpec, ...]
    models: tuple[LockedModel, ...]
    options: ResolveOptions
    writes: bool
    edit: ProjectEdit | None
    rerun: str  # `request.arguments()`, repeated in a refusal's fix
    skipped: tuple[str, ...] = ()  # warnings about the sources that were skipped


def plan(
    workspace: Workspace,
    request: LockRequest,
    *,
    recorded: tuple[str, ...] = (),
    project: Project | None = None,
    removals: dict[str, list[str]] | None = None,
) -> RelockPlan:
    """The plan to lock the project's sources plus `request.specs` (and the `recorded` specs of a
    `--record` run); `project` and `removals` are `remove()`'s edited project and what it drops."""
    project = workspace.project if project is None else project
    rerun = request.arguments()
    previous = _previous(workspace, request)
    targets = project_targets(project, request.targets)
    resolving = resolving_target(targets)
    skipped: list[str] = []
    specs = collect_specs(project, request.specs, request.scan, resolving, skipped)
    # a recorded spec that no source names yet is kept in [tool.kernlock] recorded
    new_recorded = _new_recorded(specs, recorded)
    specs += [parse_spec(text, Origin(RECORDED)) for text in new_recorded]
    declared = replace(
        project,
        models=(*project.models, *(m for m in request.models if m not in project.models)),
    )
    model_specs, model_records = model_kernels(
        project_models(declared, request.scan),
        targets,
        workspace.root,
        [spec.text for spec in specs],
        declared_capabilities(project.gpu_archs, targets),
    )
    specs += model_specs
    if not specs and not model_records and not removals:
        raise KernlockError(
            "no kernel specs found",
            fix="pass one (kernlock lock org/repo), list them in [tool.kernlock] kernels, "
            "or point [tool.kernlock] scan at your training code",
        )
    known = {s.repo for s in specs} | names(previous.lock)
    _refuse_unknown_upgrades(request.upgrade_kernels, known, rerun)
    cutoffs = request_cutoffs(project, request, previous.lock)
    options = ResolveOptions(
        targets=targets,
        all_variants=request.all_variants,
        trust_allowlist=frozenset((*project.trust, *request.trust)),
        upgrade_all=request.upgrade,
        upgrade=frozenset(request.upgrade_kernels) | changed_cutoffs(previous.lock, cutoffs),
        resolving_target=resolving,
        overrides=project.overrides,
        signing=project_policy(project),
        advisories=project_advisories(project)[0],  # less those ignored for now
        exclude_newer=cutoffs,
    )
    edit = (
        _edit(workspace.root, project, request, targets, new_recorded, removals)
        if request.writes
        else None
    )
    return RelockPlan(
        path=workspace.lock_path,
        project=project,
        previous=previous,
        specs=tuple(specs),
        models=model_records,
        options=options,
        writes=request.writes,
        edit=edit if edit is not None and edit.changes else None,
        rerun=rerun,
        skipped=tuple(skipped),
    )


def names(lock: Lockfile | None) -> set[str]:
    """Every repo name a lock's entries answer to (canonical names and aliases)."""
    return {name for kernel in (lock.kernels if lock else ()) for name in kernel.names()}


def _previous(workspace: Workspace, request: LockRequest) -> PreviousLock:
    """The lock at the workspace's lock path, as the re-lock keeps its pins."""
    migration = migration_for(workspace.lock_path, request.migrate)
    if migration is not None:
        return PreviousLock("migrated", migration.as_previous_lock(), migration)
    lock = workspace.previous_lock(request.upgrade)
    return PreviousLock("none" if lock is None else "lock", lock)


def _edit(
    root: Path,
    project: Project,
    request: LockRequest,
    targets: tuple[Target, ...],
    new_recorded: list[str],
    removals: dict[str, list[str]] | None,
) -> ProjectEdit:
    """What the request adds to `[tool.kernlock]` (like `uv add`), and `removals`."""
    configured = {str(parse_target(t)) for t in project.targets}
    additions = {
        "kernels": [s for s in request.specs if s not in project.kernels],
        "targets": [str(t) for t in targets if str(t) not in configured] if request.targets else [],
        "scan": [p for p in (relative_to(root, p) for p in request.scan) if p not in project.scan],
        "models": [m for m in request.models if m not in project.models],
        "trust": [r for r in request.trust if r not in project.trust],
        "recorded": list(new_recorded),
    }
    return ProjectEdit(additions, removals)


def _new_recorded(specs: list[KernelSpec], recorded: tuple[str, ...]) -> list[str]:
    """The recorded specs whose key none of `specs` (the project's sources) has."""
    known = {spec.key for spec in specs}
    return [text for text in recorded if parse_spec(text).key not in known]


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
