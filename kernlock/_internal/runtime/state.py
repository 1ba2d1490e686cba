"""The one lock binding active in this process: what `kernlock.apply()` bound, read by the loader
patch (`kernlock._internal.runtime.apply`) and the cross-rank guard (`kernlock._internal.runtime.rank_guard`)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernlock._internal.model.target import Target
    from kernlock._internal.lockfile.model import Lockfile


class Binding:
    """The applied lock, its path and target, strictness, and the per-process bookkeeping of the patch."""

    def __init__(self) -> None:
        self.lock: Lockfile | None = None
        self.path: Path | None = None
        self.target: Target | None = None
        self.strict = True
        self.simulated = False
        self.warned: set[str] = set()
        self.mutex = threading.RLock()
        self.patched: set[str] = set()
        self.lock_sha256: str | None = None  # of the applied lock's bytes (the run record's)
        self.loaded: dict[tuple[str, str, str], dict] = {}  # (repo, commit, variant) -> its record entry


STATE = Binding()
