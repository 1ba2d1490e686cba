"""`kernlock lock` and `kernlock remove` as library calls: sources → resolver → atomic `kernels.lock`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from kernlock.environment import parse_target
from kernlock.atomic import atomic_write
from kernlock.errors import KernlockError, TrustError, UsageError
from kernlock.hub import Hub
from kernlock.kernels_lock import migration_for
from kernlock.lockfile import Lockfile
from kernlock.lockfile_toml import write_lockfile
from kernlock.project import Project, collect_specs, project_targets, resolving_target
from kernlock.resolver import ResolveOptions, Resolver
from kernlock.spec import parse_spec
from kernlock.workspace import Workspace, exclusive_workspace


@dataclass(frozen=True)
class LockResult:
    """What `lock()` produced: the lock, where it went, and what changed."""

    lockfile: Lockfile
    path: Path
    written: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]
    updated: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    migrated: str | None = None  # what a kernels JSON lock was converted to, in one line


def _relative_to(root: Path, path: str) -> str:
    """`path` (given relative to the working directory) as written in `[tool.kernlock]`: relative to `root`."""
    absolute = Path(path).resolve()
    try:
        return absolute.relative_to(root).as_posix() or "."
    except ValueError:
        return os.path.relpath(absolute, root)


def _recorded_arguments(specs: list[str], targets: tuple[str, ...], scan: tuple[str, ...], trust: tuple[str, ...]) -> str:
    """The `kernlock lock` arguments a successful run would have recorded in `[tool.kernlock]`, as shell text."""
    import shlex

    options = [(f"--{name}", value) for name, values in (("target", targets), ("scan", scan), ("trust", trust))
               for value in values]
    return shlex.join([*specs, *(part for option in options for part in option)])


def _edit_pyproject(project: Project, additions: dict[str, list[str]], removals: dict[str, list[str]] | None = None) -> None:
    """Record command-line specs, targets, scan paths and trusted repos in `[tool.kernlock]` (like `uv add`),
    and drop removed ones (like `uv remove`); `removals` may name `kernels` and `dependencies`."""
    import tomlkit

    path = project.pyproject
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    tool = doc.setdefault("tool", tomlkit.table(is_super_table=True))
    config = tool.setdefault("kernlock", tomlkit.table())
    for key, values in additions.items():
        if not values:
            continue
        array = config.setdefault(key, tomlkit.array())
        for value in values:
            if value not in array:
                array.append(value)
    removals = removals or {}
    for value in removals.get("kernels", ()):
        config["kernels"].remove(value)
    for repo in removals.get("dependencies", ()):
        del tool["kernels"]["dependencies"][repo]
    atomic_write(path, tomlkit.dumps(doc))


def lock(
    project_dir: str | os.PathLike[str] = ".",
    specs: Iterable[str] = (),
    *,
    targets: Iterable[str] = (),
    scan: Iterable[str] = (),
    upgrade: bool = False,
    upgrade_kernels: Iterable[str] = (),
    all_variants: bool = False,
    trust: Iterable[str] = (),
    lockfile: str | os.PathLike[str] | None = None,
    write: bool = True,
    migrate: bool = False,
    progress: Callable[[str], None] | None = None,
    hub: Hub | None = None,
) -> LockResult:
    """Resolve the project's kernel specs and write `kernels.lock`.

    Existing pins are kept unless `upgrade` (all) or `upgrade_kernels` (those
    repos) asks otherwise. A kernels JSON lock at the path is converted only with
    `migrate` (its commits become pins; see `kernlock.kernels_lock`). On any error
    the previous lock is left untouched.
    """
    with exclusive_workspace(project_dir, lockfile) as workspace:
        return _relock(workspace, workspace.project, list(specs), targets=tuple(targets), scan=tuple(scan),
                       upgrade=upgrade, upgrade_kernels=tuple(upgrade_kernels), all_variants=all_variants,
                       trust=tuple(trust), write=write, migrate=migrate, progress=progress, hub=hub)


def remove(
    project_dir: str | os.PathLike[str] = ".",
    specs: Iterable[str] = (),
    *,
    lockfile: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    hub: Hub | None = None,
) -> LockResult:
    """Drop specs from `[tool.kernlock] kernels` / `[tool.kernels.dependencies]` and re-lock, keeping other pins.

    A spec matches by its text or its lock identity (`org/repo@v1`), or, when only one
    declared spec names the repo, by `org/repo`. Nothing is written unless the re-lock succeeds.
    """
    with exclusive_workspace(project_dir, lockfile) as workspace:
        project = workspace.project
        kernels, dependencies = list(project.kernels), dict(project.kernel_dependencies)
        removals: dict[str, list[str]] = {"kernels": [], "dependencies": []}
        for text in specs:
            wanted = parse_spec(text)
            declared = [k for k in kernels if k == text or parse_spec(k).key in (wanted.key, text)]
            if not declared and wanted.key == wanted.repo:
                declared = [k for k in kernels if parse_spec(k).repo == wanted.repo]
            if len(declared) > 1:
                raise UsageError(f"{text} matches {', '.join(declared)} in [tool.kernlock] kernels; name one of them")
            if declared:
                kernels.remove(declared[0])
                removals["kernels"].append(declared[0])
            elif wanted.repo in dependencies:
                del dependencies[wanted.repo]
                removals["dependencies"].append(wanted.repo)
            else:
                named = ", ".join([*kernels, *dependencies]) or "none"
                raise UsageError(
                    f"{text} is not declared in {project.pyproject.name} (declared: {named}); "
                    "specs found by [tool.kernlock] scan are removed from the scanned files"
                )
        edited = replace(project, kernels=tuple(kernels), kernel_dependencies=tuple(dependencies.items()))
        return _relock(workspace, edited, [], removals=removals, progress=progress, hub=hub)


def _relock(workspace: Workspace, project: Project, cli_specs: list[str], *, targets: tuple[str, ...] = (),
            scan: tuple[str, ...] = (), upgrade: bool = False, upgrade_kernels: tuple[str, ...] = (),
            all_variants: bool = False, trust: tuple[str, ...] = (), write: bool = True, migrate: bool = False,
            removals: dict[str, list[str]] | None = None, progress: Callable[[str], None] | None = None,
            hub: Hub | None = None) -> LockResult:
    """Resolve `project`'s sources plus `cli_specs` and write the lock and the pyproject edits (lock held)."""
    path = workspace.lockfile
    migration = migration_for(path, migrate)
    previous = migration.as_previous_lock() if migration is not None else workspace.previous_lock(upgrade)
    target_list = project_targets(project, targets)
    resolving = resolving_target(target_list)
    all_specs = collect_specs(project, cli_specs, scan, resolving)
    if not all_specs and not removals:
        raise KernlockError(
            "no kernel specs found: pass one (kernlock lock org/repo), list them in [tool.kernlock] kernels, "
            "or point [tool.kernlock] scan at your training code"
        )
    options = ResolveOptions(
        targets=target_list,
        all_variants=all_variants,
        trust_allowlist=frozenset((*project.trust, *trust)),
        upgrade_all=upgrade,
        upgrade=frozenset(upgrade_kernels),
        resolving_target=resolving,
        overrides=project.overrides,
    )
    resolver = Resolver(hub or Hub(), options, previous, progress)
    try:
        result = resolver.resolve(all_specs)
    except TrustError as error:
        if not (cli_specs or targets or scan or trust):
            raise
        raise TrustError(error.repo, _recorded_arguments(cli_specs, targets, scan, trust)) from None
    old = {k.spec: k.commit for k in previous.kernels} if previous else {}
    new = {k.spec: k.commit for k in result.kernels}
    written = False
    if write:
        configured = {str(parse_target(t)) for t in project.targets}
        additions = {
            "kernels": [s for s in cli_specs if s not in project.kernels],
            "targets": [str(t) for t in target_list if str(t) not in configured] if targets else [],
            "scan": [p for p in (_relative_to(workspace.root, p) for p in scan) if p not in project.scan],
            "trust": [r for r in trust if r not in project.trust],
        }
        if any(additions.values()) or removals:
            _edit_pyproject(project, additions, removals)
        path.parent.mkdir(parents=True, exist_ok=True)
        if migration is not None:
            migration.preserve()
        written = write_lockfile(result, path)
    return LockResult(
        lockfile=result,
        path=path,
        written=written,
        added=tuple(sorted(set(new) - set(old))),
        removed=tuple(sorted(set(old) - set(new))),
        updated=tuple(sorted(k for k in new if k in old and old[k] != new[k])),
        warnings=tuple(resolver.warnings),
        migrated=migration.summary(result) if migration is not None else None,
    )
