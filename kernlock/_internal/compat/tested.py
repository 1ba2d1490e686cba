"""The version ranges this kernlock was tested with (pyproject.toml's `kernels` dependency and its
`torch` / `transformers` extras; docs/reference/supported-versions.md), and the one warning an
installed release outside them gets: a warning, never a refusal (the doctor refuses what cannot
work, `kernlock._internal.rules.doctor`)."""

from __future__ import annotations

import re

from kernlock._internal.host import installed_version

TESTED = {
    "torch": ("2.9", "2.15"),
    "transformers": ("5.17", "5.26"),
    "kernels": ("0.16.2", "0.20"),
}


def _release(version: str) -> tuple[int, ...] | None:
    """The release numbers of a version (`2.13.0+cpu` → (2, 13, 0)), without importing packaging
    (the CLI asks at every start); None when it has none."""
    found = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in found.group(0).split(".")) if found else None


def untested_versions(installed: dict[str, str | None] | None = None) -> str | None:
    """One line naming the installed releases (`installed`, else this environment's) outside
    `TESTED`, with the ranges; None when every one is inside (or not installed)."""
    from kernlock._internal.distribution import version as kernlock_version

    found = installed or {name: installed_version(name) for name in TESTED}
    outside = []
    for name, (low, high) in TESTED.items():
        version = found.get(name)
        release = _release(version) if version is not None else None
        if release is not None and not _release(low) <= release < _release(high):  # type: ignore[operator]
            outside.append(f"{name} {version}")
    if not outside:
        return None
    ranges = ", ".join(f"{name}>={low},<{high}" for name, (low, high) in TESTED.items())
    return (
        f"{' and '.join(outside)} {'lies' if len(outside) == 1 else 'lie'} outside what kernlock "
        f"{kernlock_version()} was tested with ({ranges}; docs/reference/supported-versions.md); "
        "kernlock goes on, and a problem there is worth reporting"
    )
