"""The project's cooldown: `[tool.kernlock] exclude-newer` and `exclude-newer-kernel`, read and
checked (the values: `kernlock._internal.spec.cooldown`)::

    [tool.kernlock]
    exclude-newer = "7 days"                                   # every kernel
    exclude-newer-kernel = { "kernels-community/rotary" = "2026-11-30" }   # one repo
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernlock._internal.spec.cooldown import Cooldown, parse_cooldown
from kernlock.errors import ConfigError

EXAMPLE = '"7 days" (or a date, "2026-11-30")'


def read_value(text: Any, where: str) -> Cooldown:
    """One setting's value; `ConfigError` naming `where` (the key) otherwise."""
    if not isinstance(text, str):
        raise ConfigError(f"{where} must be a string", fix=f"write it as {EXAMPLE}")
    try:
        return parse_cooldown(text)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}", fix=f"write it as {EXAMPLE}") from None


def read_cooldowns(
    config: dict[str, Any], path: Path
) -> tuple[Cooldown | None, tuple[tuple[str, Cooldown], ...]]:
    """The project-wide cooldown (None: none) and the per-repo ones, from `[tool.kernlock]`."""
    default = config.get("exclude-newer")
    table = config.get("exclude-newer-kernel", {})
    if not isinstance(table, dict):
        raise ConfigError(
            f"{path}: [tool.kernlock] exclude-newer-kernel must be a table",
            fix='write it as exclude-newer-kernel = { "org/repo" = "7 days" }',
        )
    per_repo = []
    for repo, value in sorted(table.items()):
        if repo.count("/") != 1 or not all(repo.split("/")):
            raise ConfigError(
                f"{path}: [tool.kernlock] exclude-newer-kernel key {repo!r} is not a repo",
                fix='key it "org/repo"',
            )
        per_repo.append(
            (repo, read_value(value, f"{path}: [tool.kernlock] exclude-newer-kernel {repo!r}"))
        )
    return (
        read_value(default, f"{path}: [tool.kernlock] exclude-newer")
        if default is not None
        else None,
        tuple(per_repo),
    )
