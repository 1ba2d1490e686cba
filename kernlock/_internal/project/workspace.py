"""The workspace: the one answer to "which project, which sources, which lock file".

Every command, `kernlock.apply()` and `kernlock run` get their project and lock
path here. The lock path is, in order: the explicit argument (`--lockfile`,
`apply(lockfile=...)`), `$KERNLOCK_LOCKFILE`, then the project's `[tool.kernlock]
lockfile` (default `kernels.lock`), which must lie inside the project. With
`$KERNLOCK_VENDOR_DIR` (readers only), the project's lock still wins and the
vendor directory's own lock must agree with it; without a project lock file, the
vendor directory's lock is used as a discovered one.

A lock that was *discovered* rather than named is checked like git's
`safe.directory`: discovery stops at the project root (the nearest directory
with `pyproject.toml`, `kernels.lock` or `.git`), and a lock owned by another
user (other than root), or in a world-writable directory without the sticky
bit, is refused with the override to use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kernlock._internal import settings
from kernlock._internal.host import current_target
from kernlock._internal.lockfile.entries import LOCK_FILENAME, Lockfile
from kernlock._internal.lockfile.format_version import LOCK_VERSION
from kernlock._internal.lockfile.read_bytes import directory_error, not_regular_error
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.project.config import (
    Project,
    find_project_root,
    load_project,
    refuse_shared_new_project,
    unsafe_reason,
)
from kernlock._internal.settings import LOCKFILE_ENV, TARGET_ENV, UPGRADE_FIX, VENDOR_ENV, text
from kernlock._internal.spec.target import Target, parse_target
from kernlock.errors import (
    NO_FIX,
    ConfigError,
    LockfileError,
    LockfileNotFoundError,
    LockfileVersionError,
    TargetError,
    UnsafeLockfileError,
)


# compared by identity: no generated __eq__/__hash__ to build at import
@dataclass(frozen=True, eq=False)
class Workspace:
    """A project, its sources (`pyproject.toml`) and the lock file every command uses."""

    project: Project
    lock_path: Path
    discovered: bool  # found by looking, not named by an argument or the environment

    @property
    def root(self) -> Path:
        """The project directory."""
        return self.project.root

    @property
    def has_sources(self) -> bool:
        """Whether the project has a `pyproject.toml` to check the lock against."""
        return self.project.pyproject.is_file()

    def read_lock(self) -> Lockfile:
        """The parsed lock (raises `LockfileError`, exit 2, when missing, unsafe or invalid)."""
        check_lock_path(self.lock_path, discovered=self.discovered)
        return load_lockfile(self.lock_path)

    def previous_lock(self, upgrade: bool) -> Lockfile | None:
        """The existing lock whose pins `kernlock lock` keeps; never silently ignore an unreadable
        one.

        A lock in a newer format is refused even with `upgrade`, so an older
        kernlock never overwrites it.
        """
        if not os.path.lexists(self.lock_path):
            return None
        try:
            lock = self.read_lock()
        except (LockfileVersionError, UnsafeLockfileError):
            raise
        except LockfileError as error:
            if upgrade and self.lock_path.is_file():
                return None
            if not self.lock_path.is_file():
                raise
            raise type(error)(
                f"{error.problem} (the existing pins cannot be kept, so nothing was written)",
                key_path=error.key_path,
                source=error.source,
                fix=error.fix or NO_FIX,
            ) from None  # NO_FIX: the re-raised error's own, never a new one
        if lock.newer_format:
            raise LockfileVersionError(
                f"{self.lock_path} was written by a newer kernlock (lock format {lock.version}; "
                f"this one writes {LOCK_VERSION}) and rewriting it would drop what this one does "
                "not know",
                fix=UPGRADE_FIX,
            )
        return lock

    def all_targets(self, lock: Lockfile) -> tuple[Target, ...]:
        """What `--all-targets` means everywhere: the declared targets, else every target the lock
        covers."""
        declared = [parse_target(t) for t in self.project.targets] or lock.targets
        return tuple(sorted(set(declared), key=str))

    def chosen_targets(
        self, lock: Lockfile, targets: Iterable[str | Target] = (), all_targets: bool = False
    ) -> list[Target]:
        """The targets a reader works on: `targets`, plus `all_targets()` when asked, else
        `$KERNLOCK_TARGET`, else this environment."""
        chosen = {parse_target(str(t)) for t in targets}
        if all_targets:
            chosen.update(self.all_targets(lock))
        if not chosen:
            simulated = text(TARGET_ENV)
            if simulated:  # $KERNLOCK_TARGET stands in for this environment, as it does for apply()
                chosen.add(parse_target(simulated))
                return sorted(chosen, key=str)
            try:
                chosen.add(current_target())
            except TargetError as error:
                raise TargetError(
                    error.message,
                    fix="pass --target explicitly or --all-targets "
                    "(or declare [tool.kernlock] targets)",
                ) from None
        return sorted(chosen, key=str)


def check_lock_path(path: Path, *, discovered: bool) -> None:
    """Refuse a lock path that is not a regular file, or (when discovered) that someone else
    controls."""
    if path.is_dir():
        raise directory_error(path)
    if os.path.exists(path) and not path.is_file():
        raise not_regular_error(path)
    if not discovered or not path.exists():
        return
    reason = unsafe_reason(path)
    if reason is not None:
        override = (
            f"if you trust it, name it explicitly (--lockfile {path}, ${LOCKFILE_ENV} or "
            "kernlock.apply(lockfile=...))"
        )
        raise UnsafeLockfileError(f"refusing {path}: {reason}", fix=override)


def configured_lockfile(project: Project) -> Path:
    """`[tool.kernlock] lockfile` inside the project (an error when it points outside, also through
    a symlinked directory). The lock file itself may be a symlink the project keeps: it is updated
    through the link."""
    name = project.lockfile_name
    relative = os.path.normpath(name)
    root = os.path.realpath(project.root)
    folder = os.path.realpath(os.path.dirname(os.path.join(root, relative)))
    if (
        os.path.isabs(name)
        or relative == ".."
        or relative.startswith(".." + os.sep)
        or not (folder == root or folder.startswith(root + os.sep))
    ):
        raise ConfigError(
            f"{project.pyproject}: [tool.kernlock] lockfile = {name!r} lies outside the project "
            f"{project.root}",
            fix=f"use a path inside it, or name it explicitly with --lockfile {name}",
        )
    return project.root / relative


def vendor_dir() -> Path | None:
    """The vendor directory named by `$KERNLOCK_VENDOR_DIR`, if any."""
    return settings.path(VENDOR_ENV)


def named_lockfile(lockfile: str | os.PathLike[str] | None = None) -> Path | None:
    """The lock named rather than discovered: the argument, else `$KERNLOCK_LOCKFILE`."""
    if lockfile is not None:
        return Path(lockfile)
    return settings.path(LOCKFILE_ENV)


def vendored_lockfile(vendor: Path, project_lock: Path | None) -> Path:
    """The lock a reader uses with `$KERNLOCK_VENDOR_DIR`: the project's lock, once the vendor
    directory's agrees.

    The vendor directory's lock must hold every entry of the project's lock unchanged
    (commits, variants, hashes); a disagreement is an error naming both. Without a
    project lock file, the vendor directory's lock counts as discovered (owner and
    permission rules apply).
    """
    theirs = vendor / LOCK_FILENAME
    if not theirs.is_file():
        raise LockfileNotFoundError(
            f"${VENDOR_ENV} points at {vendor}, which has no {LOCK_FILENAME}",
            fix=f"create it with `kernlock vendor {vendor}`",
        )
    if project_lock is None or not os.path.lexists(project_lock):
        _refuse_shared_vendor_lock(vendor, theirs)
        return theirs
    check_lock_path(project_lock, discovered=True)
    ours = load_lockfile(project_lock)
    vendored = load_lockfile(theirs).kernels
    differing = [kernel.spec for kernel in ours.kernels if kernel not in vendored]
    if differing:
        raise LockfileError(
            f"the vendor directory's {theirs} disagrees with the project's {project_lock} on "
            f"{', '.join(differing[:3])}{'…' if len(differing) > 3 else ''}; the project's lock "
            "wins",
            fix=f"re-export the vendor directory with `kernlock vendor {vendor}` from the project",
        )
    return project_lock


def _refuse_shared_vendor_lock(vendor: Path, lock: Path) -> None:
    """A vendor lock that is the authority (no project lock file) is trusted only when no one else
    can change it.

    Ownership is not integrity: in a group-writable (setgid, umask 002) vendor directory another
    member can rewrite the lock in place, files and hashes together, and it keeps its owner's uid.
    """
    import stat

    for path in (lock, vendor):
        mode = path.stat().st_mode
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            who = "its group" if mode & stat.S_IWGRP else "every user"
            raise UnsafeLockfileError(
                f"refusing {lock}: {path} is writable by {who}, so someone else could rewrite the "
                "lock and its hashes together; a vendor lock is trusted as the lock only when no "
                "one else can write it",
                fix="run where the project's own kernels.lock pins the vendored builds, or "
                f"`chmod go-w {vendor} {lock}`",
            )


def open_workspace(
    project_dir: str | os.PathLike[str] = ".",
    lockfile: str | os.PathLike[str] | None = None,
    *,
    readers: bool = True,
) -> Workspace:
    """The workspace of the project at or above `project_dir`: the named lock, else the configured
    one."""
    project = load_project(find_project_root(Path(project_dir)))
    named = named_lockfile(lockfile)
    if named is not None:
        return Workspace(project=project, lock_path=named, discovered=False)
    configured = configured_lockfile(project)
    vendor = vendor_dir() if readers else None
    path = vendored_lockfile(vendor, configured) if vendor is not None else configured
    return Workspace(project=project, lock_path=path, discovered=True)


@contextmanager
def exclusive_workspace(
    project_dir: str | os.PathLike[str] = ".", lockfile: str | os.PathLike[str] | None = None
) -> Iterator[Workspace]:
    """The workspace, read and held under the per-project cross-process mutex (for writers); never a
    new project in a directory every user can write (`refuse_shared_new_project`)."""
    from kernlock._internal.fs.mutex import ProjectMutex

    root = find_project_root(Path(project_dir))
    refuse_shared_new_project(root)
    with ProjectMutex(root):
        yield open_workspace(project_dir, lockfile, readers=False)


def applied_workspace(
    lockfile: str | os.PathLike[str] | None = None,
    *,
    scripts: Sequence[str] | None = None,
    naming: str = "pass kernlock.apply(lockfile=...)",
) -> Workspace:
    """The workspace `apply()` and `kernlock run` use: the named lock, else the project's from the
    working directory, else from the directory of the script being run.

    `scripts` are the paths that may name that script (default: `sys.argv[0]`, the script of an
    `apply()`); `kernlock run` passes its command's, never its own executable, so a lock is never
    borrowed from the project kernlock is installed in. With a named lock the project's settings
    are not read (a child process under `kernlock run` never parses `pyproject.toml`). `naming` is
    how the caller's user names a lock, offered when none is found.
    """
    named = named_lockfile(lockfile)
    if named is not None:
        if not named.is_file():
            check_lock_path(named, discovered=False)
            where = (
                f"${LOCKFILE_ENV} points at {named}, which"
                if lockfile is None and settings.text(LOCKFILE_ENV)
                else f"lock file {named}"
            )
            raise LockfileNotFoundError(
                f"{where} does not exist", fix="create it with `kernlock lock`"
            )
        return Workspace(
            project=Project(root=find_project_root(Path.cwd())), lock_path=named, discovered=False
        )
    if scripts is None:
        scripts = sys.argv[:1] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ()
    starts = [
        Path.cwd(),
        *(Path(script).resolve().parent for script in scripts if Path(script).is_file()),
    ]
    looked = []
    for start in starts:
        workspace = open_workspace(start, readers=False)
        if os.path.lexists(workspace.lock_path):
            if (vendor := vendor_dir()) is not None:
                vendored_lockfile(vendor, workspace.lock_path)
            return workspace
        # the script may live in the working directory's project
        if str(workspace.lock_path) not in looked:
            looked.append(str(workspace.lock_path))
    if (vendor := vendor_dir()) is not None:
        return Workspace(
            project=Project(root=find_project_root(Path.cwd())),
            lock_path=vendored_lockfile(vendor, None),
            discovered=True,
        )
    raise LockfileNotFoundError(
        f"no lock file found (looked for {' and '.join(looked)}; ${LOCKFILE_ENV} is unset)",
        fix=f"run `kernlock lock` or {naming}",
    )


__all__ = [
    "LOCKFILE_ENV",
    "Workspace",
    "applied_workspace",
    "check_lock_path",
    "configured_lockfile",
    "exclusive_workspace",
    "named_lockfile",
    "open_workspace",
]
