"""A commit's build variants: grouped from its file listing, and the one kernels would load on a
target.

The choice is kernels' own parsing and ranking
(`kernlock._internal.compat.kernels_api.target_decisions`), evaluated for any target rather than the
running machine; used at lock time and by `kernlock explain`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kernlock._internal.compat.kernels_api import preferred, target_decisions
from kernlock._internal.hub.responses import TreeFile
from kernlock._internal.spec.ids import is_safe_relpath, is_variant_name
from kernlock._internal.spec.target import Target
from kernlock.errors import ResolutionError

MAX_VARIANTS = 1000
_IGNORED = re.compile(r"(^|/)__pycache__/|\.pyc$")


def choose_variant(variant_names: Iterable[str], target: Target) -> tuple[str | None, list[str]]:
    """The variant kernels would load on `target`, and one line per variant with kernels' reason."""
    decisions = target_decisions(variant_names, target)
    chosen = preferred(decisions)
    lines = []
    for decision in decisions:
        if decision.accepted:
            lines.append(
                f"{decision.variant}: "
                f"{'chosen' if decision.variant == chosen else 'compatible, lower preference'}"
            )
        else:
            lines.append(f"{decision.variant}: {decision.reason}")
    return chosen, lines


_LEGACY_NAME = re.compile(r"torch(\d)(\d{1,2})-(cxx11|cxx98)-([a-z0-9]+)-([a-z0-9_]+)-([a-z]+)")


def variant_target(name: str) -> str | None:
    """The target a legacy build variant name is built for (`torch214-cxx11-cpu-x86_64-linux` →
    `torch2.14-cxx11-cpu-x86_64-linux`), or None for other names."""
    from kernlock._internal.spec.target import parse_target
    from kernlock.errors import TargetError

    match = _LEGACY_NAME.fullmatch(name)
    if match is None:
        return None
    major, minor, abi, backend, cpu, os_name = match.groups()
    try:
        return str(parse_target(f"torch{major}.{minor}-{abi}-{backend}-{cpu}-{os_name}"))
    except TargetError:
        return None


def python_choices(variant_names: Iterable[str], target: Target) -> dict[str, str | None]:
    """For a target without a Python part: the variant kernels would load on each Python 3.9-3.15
    (GIL), by version.

    One choice for all of them means the lock does not depend on the interpreter that wrote it.
    """
    from dataclasses import replace

    names = list(variant_names)
    return {
        python: choose_variant(names, replace(target, python=python, free_threaded=False))[0]
        for python in (f"3.{minor}" for minor in range(9, 16))
    }


def group_variants(repo: str, commit: str, files: list[TreeFile]) -> dict[str, list[TreeFile]]:
    """Files under `build/` grouped by variant, rejecting hostile names."""
    grouped: dict[str, list[TreeFile]] = {}
    for entry in files:
        path = entry.path
        parts = path.split("/")
        if not is_safe_relpath(path) or len(parts) < 3 or parts[0] != "build":
            raise ResolutionError(
                f"{repo}@{commit[:12]}: the Hub listed an unsafe file path {path!r}; refusing to "
                "lock it",
                fix=f"lock another revision ({repo}@<revision>), or report the repo to its "
                "publisher",
            )
        variant = parts[1]
        if not is_variant_name(variant):
            raise ResolutionError(
                f"{repo}@{commit[:12]}: the Hub listed an unsafe variant name {variant!r}; "
                "refusing to lock it",
                fix=f"lock another revision ({repo}@<revision>), or report the repo to its "
                "publisher",
            )
        if _IGNORED.search(path):
            continue
        grouped.setdefault(variant, []).append(entry)
    if len(grouped) > MAX_VARIANTS:
        raise ResolutionError(
            f"{repo}@{commit[:12]}: {len(grouped)} build variants is more than kernlock accepts "
            f"({MAX_VARIANTS})",
            fix=f"lock another revision ({repo}@<revision>), or ask the publisher to prune "
            "old builds",
        )
    return grouped
