"""Recording command-line sources in `[tool.kernlock]` of `pyproject.toml` (like `uv add`), dropping
removed ones (like `uv remove`), and putting the file back when the lock could not be written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kernlock._internal.fs.atomic import atomic_write
from kernlock._internal.project.config import Project


def relative_to(root: Path, path: str) -> str:
    """`path` (given relative to the working directory) as written in `[tool.kernlock]`: relative to
    `root`."""
    absolute = Path(path).resolve()
    try:
        return absolute.relative_to(root).as_posix() or "."
    except ValueError:
        return os.path.relpath(absolute, root)


def edit_pyproject(
    project: Project, additions: dict[str, list[str]], removals: dict[str, list[str]] | None = None
) -> None:
    """Record command-line specs, targets, scan paths and trusted repos in `[tool.kernlock]` (like
    `uv add`), and drop removed ones (like `uv remove`); `removals` may name `kernels`,
    `recorded`, `dependencies`, `groups.NAME` (a group's specs; the group stays, if empty) and the
    `overrides` of repos nothing declares any more. Everything else, comments too, is kept."""
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
    _drop(tool, config, removals or {})
    atomic_write(path, tomlkit.dumps(doc))


def _drop(tool: Any, config: Any, removals: dict[str, list[str]]) -> None:
    """Drop `removals` (see `edit_pyproject`) from the parsed `[tool]` and `[tool.kernlock]`."""
    for key in ("kernels", "recorded"):
        for value in removals.get(key, ()):
            config[key].remove(value)
    for key, values in removals.items():
        if key.startswith("groups."):
            members = config["groups"][key.removeprefix("groups.")]
            for value in values:
                while value in members:
                    members.remove(value)
    for repo in removals.get("dependencies", ()):
        del tool["kernels"]["dependencies"][repo]
    overrides = config.get("overrides")
    for repo in removals.get("overrides", ()):
        if overrides is not None and repo in overrides:
            del overrides[repo]
    if overrides is not None and not overrides and removals.get("overrides"):
        del config["overrides"]
    for key in ("kernels", "recorded"):
        if key in config and not config[key] and removals.get(key):
            del config[key]  # no `kernels = []` left behind, as `uv remove` leaves no empty table


def restore_pyproject(path: Path, before: bytes | None) -> None:
    """Put `pyproject.toml` back as it was before this lock edited it (None: it did not exist)."""
    if before is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write(path, before)
