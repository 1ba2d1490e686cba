"""An override whose `backend`, `cpu` or `os` matches no build of the locked commit and no target
(`backend = "cu12B"`): a typo that would silently switch the workaround off, refused with the
nearest value."""

from __future__ import annotations

import fnmatch
import os

from kernlock._internal.hub.variants import variant_target
from kernlock._internal.lockfile.entries import Lockfile
from kernlock._internal.project.suggest import close_name
from kernlock._internal.spec.overrides import OverrideRule
from kernlock._internal.spec.target import Target, parse_target
from kernlock.errors import ConfigError

_KEYS = ("backend", "cpu", "os")


def _values(lock: Lockfile, repo: str) -> dict[str, set[str]]:
    """Every backend, CPU and OS the repo's locked commits build for, and the lock's targets'."""
    targets: list[Target] = list(lock.targets)
    for kernel in lock.kernels:
        if repo in kernel.names():
            targets += [parse_target(t) for n in kernel.build_variants if (t := variant_target(n))]
    return {key: {getattr(target, key) for target in targets} for key in _KEYS}


def unmatched_override_value(
    rules: tuple[OverrideRule, ...], lock: Lockfile, pyproject: str
) -> tuple[str, str] | None:
    """The first override value no build nor target has, as a problem and its fix (None: each
    matches something)."""
    for rule in rules:
        values = _values(lock, rule.repo)
        for key in _KEYS:
            wanted = getattr(rule, key)
            if not wanted or any(fnmatch.fnmatchcase(value, wanted) for value in values[key]):
                continue
            match = close_name(wanted, values[key], cutoff=0.6)
            table = f'[tool.kernlock.overrides."{rule.repo}"]'
            return (
                f'{pyproject}: {table}: {key} = "{wanted}" matches no build of the locked '
                f"commit and no target (they have {', '.join(sorted(values[key])) or 'none'}), so "
                "the override would never apply" + (f" (did you mean {match}?)" if match else ""),
                f'change {key} = "{wanted}" to {key} = "{match}" in {table} of '
                f"{os.path.basename(pyproject)}"
                if match
                else f"correct {key} in {table}, or remove that override",
            )
    return None


def refuse_unmatched_override_values(
    rules: tuple[OverrideRule, ...], lock: Lockfile, pyproject: str
) -> None:
    """Raise `ConfigError` for the first override value no build nor target has (`kernlock lock`:
    nothing is written)."""
    found = unmatched_override_value(rules, lock, pyproject)
    if found is not None:
        raise ConfigError(f"{found[0]}; nothing was written", fix=found[1])
