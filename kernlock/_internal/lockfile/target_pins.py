"""Per-target pins kernlock makes itself: one target of a spec locked at another commit than the
spec's entry.

Two things make them: a build for a new target appended to the locked branch after the
entry's commit (`kernlock._internal.resolve.appended`), and an advisory that rules out the build a
target would get (`kernlock.advisories`). Each is a lock entry of its own, like an override's
(`[tool.kernlock.overrides]`), whose `override` names the one target it covers::

    override = {when = "target=torch2.14-cxx11-cpu-x86_64-linux", use = "<commit>", reason = "build
    appended at 0123456789ab"}

`when` never looks like a configured override's (`backend=cu128 torch>=2.9`), so the
freshness check tells them apart: no `[tool.kernlock.overrides]` declares these. A
re-lock keeps them like any pin; `kernlock lock -P REPO` (or `--upgrade`) drops them and
resolves the spec again.
"""

from __future__ import annotations

from kernlock._internal.lockfile.entries import Override
from kernlock._internal.spec.target import Target

PREFIX = "target="


def target_pin(target: Target, commit: str, reason: str) -> Override:
    """The `override` of an entry that pins `target` alone to `commit`, and why."""
    return Override(when=f"{PREFIX}{target}", use=commit, reason=reason)


def is_target_pin(override: Override | None) -> bool:
    """Whether an entry's override is a per-target pin kernlock made (not one
    `[tool.kernlock.overrides]` declares)."""
    return override is not None and override.when.startswith(PREFIX)


def pinned_target(override: Override) -> str:
    """The target text a per-target pin covers."""
    return override.when[len(PREFIX) :]
