"""Where a writer of the lock refuses to write: over a file that is not a lock, through a link out
of the project, into a directory that does not exist."""

from __future__ import annotations

import os
from pathlib import Path

from kernlock._internal.lockfile.entries import LOCK_FILENAME
from kernlock._internal.project.workspace import Workspace
from kernlock.errors import UsageError


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
