"""What a re-lock changed: one `Change` per entry whose commit or signer moved, and why;
`LockResult`, what `lock()` and `remove()` return."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from kernlock._internal.lockfile.entries import LockedKernel, Lockfile
from kernlock._internal.lockfile.target_pins import is_target_pin


class Change(NamedTuple):
    """One lock entry whose commit (or signer) a re-lock changed, and why (`reason`, one of
    `REASONS`)."""

    spec: str
    # the targets an override entry applies to (`backend=cu128`), None for the spec's own
    override: str | None
    old: str | None  # the commit before (None: added)
    new: str | None  # the commit after (None: removed)
    reason: str
    # (before, after) when the entry's signers change (`entry_signers`)
    signer: tuple[str, str] | None = None

    def describe(self, gap: str = " ") -> str:
        """`spec [override]{gap}old -> new{gap}(reason[; signer before -> after])`, commits
        abbreviated (`-` for none)."""
        name = f"{self.spec} [{self.override}]" if self.override else self.spec
        signer = f"; signer {self.signer[0]} -> {self.signer[1]}" if self.signer else ""
        return (
            f"{name}{gap}{(self.old or '-')[:12]} -> "
            f"{(self.new or '-')[:12]}{gap}({self.reason}{signer})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The change as JSON (`kernlock lock --json` → `changes`); `signer` only when it
        changes."""
        data: dict[str, Any] = self._asdict()
        if self.signer is None:
            del data["signer"]
        else:
            data["signer"] = dict(zip(("old", "new"), self.signer, strict=False))
        return data


def entry_signers(kernel: LockedKernel) -> str | None:
    """Who signed an entry's variants (`build-signer` URIs, or `unsigned`), in one text; None when a
    signed variant records no signer (a lock from before format 1.1)."""
    if any(v.signed and v.signature is None for v in kernel.variants):
        return None
    return ", ".join(
        sorted({v.signature.build_signer if v.signature else "unsigned" for v in kernel.variants})
    )


def lock_changes(
    old: Lockfile | None, new: Lockfile, reasons: Mapping[tuple[str, str], str] | None = None
) -> tuple[Change, ...]:
    """The entries (by identity: spec and override) whose commit or signers differ between `old` and
    `new`; `reasons` (the resolver's, by identity) says why where the two locks cannot."""
    before = {k.identity: k for k in old.kernels} if old else {}
    after = {k.identity: k for k in new.kernels}
    changes = []
    for identity in sorted(before.keys() | after.keys()):
        was, now = before.get(identity), after.get(identity)
        old_signer, new_signer = (
            (entry_signers(was), entry_signers(now)) if was and now else (None, None)
        )
        signer = (
            (old_signer, new_signer)
            if old_signer is not None and new_signer is not None and old_signer != new_signer
            else None
        )
        if was is None or now is None or was.commit != now.commit or signer:
            reason = (
                (reasons or {}).get(identity)
                if now is not None and (was is None or was.commit != now.commit)
                else None
            )
            changes.append(
                Change(
                    identity[0],
                    identity[1] or None,
                    was.commit if was else None,
                    now.commit if now else None,
                    reason or _reason(was, now),
                    signer,
                )
            )
    return tuple(changes)


def _reason(was: LockedKernel | None, now: LockedKernel | None) -> str:
    """Why an entry changed: an override's doing, a new or dropped spec, another version, or its
    branch moving."""
    if was is None or now is None:
        entry = was or now
        assert entry is not None  # lock_changes passes at least one
        if is_target_pin(entry.override) and now is not None:
            assert entry.override is not None
            return entry.override.reason
        return "override" if entry.override else "added" if was is None else "removed"
    if was.override != now.override:
        return (
            now.override.reason
            if is_target_pin(now.override) and now.override is not None
            else "override"
        )
    if was.commit == now.commit:
        # the same commit, another signer than the old lock records (it was edited)
        return "re-verified"
    return "upgraded" if (was.ref, was.version) != (now.ref, now.version) else "branch moved"


@dataclass(frozen=True)
class LockResult:
    """What `lock()` produced: the lock, where it went, and what changed.

    `added`/`removed`/`updated` are spec keys; `changes` has one line per changed entry;
    `changed` is whether the lock's bytes differ (or would, when nothing was written).
    """

    lock: Lockfile
    path: Path
    written: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]
    updated: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    migrated: str | None = None  # what a kernels JSON lock was converted to, in one line
    changes: tuple[Change, ...] = ()
    changed: bool = False
