"""The one lock binding active in this process: what `kernlock.apply()` bound, read by the loader
patch (`kernlock._internal.runtime.apply`) and the cross-rank guard
(`kernlock._internal.runtime.rank_guard`).

The binding is one frozen record (`Binding`), swapped whole in one assignment (`bind`): a reader
takes `binding()` once and sees one apply()'s lock, path, target and strictness together, never half
of the next. What the process did under its bindings (warnings said, modules patched, kernels
loaded) is `BOOK`'s.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernlock._internal.lockfile.entries import Lockfile
    from kernlock._internal.spec.target import Target


@dataclass(frozen=True)
class Binding:
    """The applied lock, its path and target, strictness, whether the target is simulated, the
    lock's sha256, the groups chosen."""

    lock: Lockfile
    path: Path
    target: Target
    strict: bool = True
    simulated: bool = False
    lock_sha256: str | None = None  # of the applied lock's bytes (the run record's)
    groups: tuple[str, ...] = ()  # the groups chosen (`lock` holds only theirs and the ungrouped)
    elsewhere: tuple[tuple[str, str], ...] = ()  # repo -> the unchosen groups that alone lock it


class Bookkeeping:
    """The per-process bookkeeping of the patch, under `mutex`."""

    def __init__(self) -> None:
        self.mutex = threading.RLock()
        self.warned: set[str] = set()
        self.patched: set[str] = set()
        self.loaded: dict[
            tuple[str, str, str], dict[str, Any]
        ] = {}  # (repo, commit, variant) -> its record entry
        # repo -> why kernlock kept its layers native (unlocked, native on this target, not loaded)
        self.native: dict[str, str] = {}
        # layer name -> what ran it: {"repo", "commit", "variant"} or {"native": why}
        self.layers: dict[str, dict[str, str]] = {}


BOOK = Bookkeeping()
_binding: Binding | None = None


def binding() -> Binding | None:
    """The binding `apply()` made in this process, or None."""
    return _binding


def bind(new: Binding | None) -> None:
    """Swap the process's binding (None: release it) in one assignment."""
    global _binding
    _binding = new
