"""A per-user cache of parsed, validated locks, keyed by the lock's exact bytes.

`kernlock verify` runs on every commit and re-reads the same lock each time; for a
large lock (50 kernels x 20 variants, ~700 KB) TOML parsing is most of its cost. A
lock whose bytes were parsed before is loaded from a pickle instead, about 8x faster.

The key is SHA-256 over the lock's bytes and over the identity of the code that
parsed it (kernlock's version, `lockfile.py`'s size and mtime, Python's version), so
an edited lock, an upgraded or edited kernlock, or another Python never reads a stale
entry. Only successful parses are stored; a lock that fails validation is re-parsed
(and fails) every time. Small locks parse in a few milliseconds and are not cached.

Where: `$KERNLOCK_CACHE_DIR`, else `$XDG_CACHE_HOME/kernlock`, else `~/.cache/kernlock`
(`parsed/` inside it). `KERNLOCK_NO_CACHE=1` turns the cache off. Entries are read only
from a directory owned by the current user and writable by nobody else (pickles
must not come from another user). Every failure to read or write is silent: the
cache only ever saves time.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path

import kernlock
from kernlock import lockfile
from kernlock.lockfile import Lockfile

MIN_CACHED_BYTES = 32 * 1024
MAX_ENTRIES = 32


def cache_root() -> Path | None:
    """kernlock's user cache directory, or None when caching is turned off."""
    if os.environ.get("KERNLOCK_NO_CACHE", "").strip() not in ("", "0"):
        return None
    explicit = os.environ.get("KERNLOCK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kernlock"


def entry_for(data: bytes) -> Path | None:
    """Where the parse of these lock bytes is cached, or None when they are not cached."""
    root = cache_root()
    if root is None or len(data) < MIN_CACHED_BYTES:
        return None
    code = Path(lockfile.__file__).stat()
    identity = f"{kernlock.__version__}|{code.st_size}|{code.st_mtime_ns}|{sys.version}".encode()
    digest = hashlib.sha256(identity + b"\0" + data).hexdigest()
    return root / "parsed" / f"{digest}.pickle"


def _private(directory: Path) -> bool:
    try:
        info = directory.stat()
    except OSError:
        return False
    if not hasattr(os, "getuid"):  # Windows: per-user profile directories
        return True
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


def load_parsed(entry: Path | None) -> Lockfile | None:
    """The lock stored at `entry` (from `entry_for`), or None."""
    try:
        if entry is None or not _private(entry.parent):
            return None
        with open(entry, "rb") as handle:
            lock = pickle.load(handle)
    except Exception:  # a missing, truncated or foreign entry is a cache miss
        return None
    return lock if isinstance(lock, Lockfile) else None


def store_parsed(entry: Path | None, lock: Lockfile) -> None:
    """Store `lock` at `entry` (from `entry_for`); drop the oldest entries beyond `MAX_ENTRIES`."""
    try:
        if entry is None:
            return
        entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(entry.parent):
            return
        handle, temp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=entry.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                pickle.dump(lock, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temp, entry)
        finally:
            Path(temp).unlink(missing_ok=True)
        entries = sorted(entry.parent.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns)
        for stale in entries[:-MAX_ENTRIES]:
            stale.unlink(missing_ok=True)
    except Exception:  # best effort: a read-only or full disk only costs speed
        return
