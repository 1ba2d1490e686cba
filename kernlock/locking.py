"""`kernlock lock` as a library call: sources → resolver → atomic `kernels.lock`."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kernlock.environment import parse_target
from kernlock.errors import KernlockError, LockfileError
from kernlock.hub import Hub
from kernlock.lockfile import Lockfile, load_lockfile, write_lockfile
from kernlock.project import (
    Project,
    collect_specs,
    find_project_root,
    load_project,
    project_targets,
    resolving_target,
)
from kernlock.resolver import ResolveOptions, Resolver


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


def _file_lock(path: Path):
    """An inter-process lock serialising writers of one lock file (kept outside the project)."""
    from filelock import FileLock

    directory = Path(os.environ.get("KERNLOCK_STATE_DIR") or Path(tempfile.gettempdir()) / "kernlock-locks")
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]
    return FileLock(str(directory / f"{digest}.lock"))


def _add_to_pyproject(project: Project, specs: list[str], targets: list[str]) -> None:
    """Record command-line specs and targets in `[tool.kernlock]`, like `uv add` (atomic write)."""
    import tomlkit

    path = project.pyproject
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    tool = doc.setdefault("tool", tomlkit.table(is_super_table=True))
    config = tool.setdefault("kernlock", tomlkit.table())
    for key, values in (("kernels", specs), ("targets", targets)):
        if not values:
            continue
        array = config.setdefault(key, tomlkit.array())
        for value in values:
            if value not in array:
                array.append(value)
    handle, temp = tempfile.mkstemp(prefix=".pyproject.", suffix=".tmp", dir=path.parent)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(tomlkit.dumps(doc))
    os.replace(temp, path)


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
    progress: Callable[[str], None] | None = None,
    hub: Hub | None = None,
) -> LockResult:
    """Resolve the project's kernel specs and write `kernels.lock`.

    Existing pins are kept unless `upgrade` (all) or `upgrade_kernels` (those
    repos) asks otherwise. On any error the previous lock is left untouched.
    """
    root = find_project_root(Path(project_dir))
    project = load_project(root)
    path = Path(lockfile) if lockfile is not None else project.lockfile
    cli_specs = list(specs)
    target_list = project_targets(project, tuple(targets))
    resolving = resolving_target(target_list)
    all_specs = collect_specs(project, cli_specs, scan, resolving)
    if not all_specs:
        raise KernlockError(
            "no kernel specs found: pass one (kernlock lock org/repo), list them in [tool.kernlock] kernels, "
            "or point [tool.kernlock] scan at your training code"
        )
    with _file_lock(path):
        previous = None
        if path.exists():
            try:
                previous = load_lockfile(path)
            except LockfileError:
                previous = None  # unreadable old lock: resolve everything anew
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
        result = resolver.resolve(all_specs)
        old = {k.spec: k.commit for k in previous.kernels} if previous else {}
        new = {k.spec: k.commit for k in result.kernels}
        written = False
        if write:
            new_specs = [s for s in cli_specs if s not in project.kernels]
            configured = {str(parse_target(t)) for t in project.targets}
            new_targets = [str(t) for t in target_list if str(t) not in configured] if targets else []
            if new_specs or new_targets:
                _add_to_pyproject(project, new_specs, new_targets)
            written = write_lockfile(result, path)
        return LockResult(
            lockfile=result,
            path=path,
            written=written,
            added=tuple(sorted(set(new) - set(old))),
            removed=tuple(sorted(set(old) - set(new))),
            updated=tuple(sorted(k for k in new if k in old and old[k] != new[k])),
            warnings=tuple(resolver.warnings),
        )
