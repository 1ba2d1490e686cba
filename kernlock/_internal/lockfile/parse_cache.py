"""A per-user cache of parsed, validated locks, keyed by the lock's exact bytes.

`kernlock verify` runs on every commit and re-reads the same lock each time; for a
large lock (50 kernels x 20 variants, ~700 KB) TOML parsing and validation are most
of its cost. A lock whose bytes were parsed before is loaded from a JSON entry in
kernlock's private directory (`kernlock._internal.fs.private`) instead.

The key is SHA-256 over the lock's bytes and over the identity of the code that
parsed it (kernlock's version, the size and mtime of the modules in `PARSING_CODE`,
Python's version), so an edited lock, an upgraded or edited
kernlock, or another Python never reads a stale entry. An entry is the lock's
`to_dict()` as plain JSON (loading one cannot run code), signed with the user's
key, so an entry that this user's kernlock did not write for these exact lock
bytes is a miss and cannot change the hashes kernlock checks; a hit is rebuilt
with `Lockfile.from_own_dict` without validating it again. Only successful parses are stored;
small locks parse in a few milliseconds and are not cached.
`KERNLOCK_NO_CACHE=1` turns the cache off.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernlock._internal.fs import private
from kernlock._internal.lockfile.entries import Lockfile

MIN_CACHED_BYTES = 32 * 1024
MAX_ENTRIES = 32
_PREFIX = "parsed"
# The modules whose code decides a parse, by name (imported before any parse: lockfile_toml is the
# caller).
PARSING_CODE = (
    "kernlock._internal.lockfile.entries",
    "kernlock._internal.lockfile.table",
    "kernlock._internal.lockfile.serialize",
)


def entry_for(data: bytes) -> str | None:
    """The entry name of these lock bytes' parse, or None when they are not cached."""
    if len(data) < MIN_CACHED_BYTES or private.cache_root() is None:
        return None
    code = "|".join(
        f"{info.st_size}|{info.st_mtime_ns}"
        for info in (Path(str(sys.modules[name].__file__)).stat() for name in PARSING_CODE)
    )
    identity = f"{code}|{sys.version}"
    return private.entry_name(_PREFIX, identity, data)


def load_parsed(entry: str | None) -> Lockfile | None:
    """The lock stored under `entry` (from `entry_for`), or None."""
    if entry is None:
        return None
    payload = private.read_entry(entry)
    if payload is None:
        return None
    try:
        return Lockfile.from_own_dict(json.loads(payload))
    except Exception:  # an entry from an older model of the lock is a miss
        return None


def store_parsed(entry: str | None, lock: Lockfile) -> None:
    """Store `lock` under `entry` (from `entry_for`); drop the oldest entries beyond
    `MAX_ENTRIES`."""
    if entry is None:
        return
    if private.write_entry(entry, json.dumps(lock.to_dict(), separators=(",", ":")).encode()):
        private.prune(_PREFIX + "-", MAX_ENTRIES)
