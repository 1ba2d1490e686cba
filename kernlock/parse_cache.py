"""A per-user cache of parsed, validated locks, keyed by the lock's exact bytes.

`kernlock verify` runs on every commit and re-reads the same lock each time; for a
large lock (50 kernels x 20 variants, ~700 KB) TOML parsing and validation are most
of its cost. A lock whose bytes were parsed before is loaded from a JSON entry in
kernlock's private directory (`kernlock.private`) instead.

The key is SHA-256 over the lock's bytes and over the identity of the code that
parsed it (kernlock's version, `lockfile.py`'s size and mtime, Python's version), so
an edited lock, an upgraded or edited kernlock, or another Python never reads a stale
entry. Entries are plain JSON (loading one cannot run code) signed with the user's
key, so an entry that this user's kernlock did not write for these exact lock bytes
is a miss and cannot change the hashes kernlock checks. Only successful parses are
stored; small locks parse in a few milliseconds and are not cached.
`KERNLOCK_NO_CACHE=1` turns the cache off.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import kernlock
from kernlock import lockfile, private
from kernlock.lockfile import Lockfile

MIN_CACHED_BYTES = 32 * 1024
MAX_ENTRIES = 32
_PREFIX = "parsed"


def entry_for(data: bytes) -> str | None:
    """The entry name of these lock bytes' parse, or None when they are not cached."""
    if len(data) < MIN_CACHED_BYTES or private.cache_root() is None:
        return None
    code = Path(lockfile.__file__).stat()
    identity = f"{kernlock.__version__}|{code.st_size}|{code.st_mtime_ns}|{sys.version}"
    return private.entry_name(_PREFIX, identity, data)


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_encode(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _encode(item) for key, item in value.items()}
    return value


def _identity(value: Any) -> Any:
    return value


@functools.lru_cache(maxsize=None)
def _decoder(kind: Any) -> Callable[[Any], Any]:
    """A function turning the JSON form of `kind` (a type hint) back into it."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        inner = _decoder(next(arg for arg in typing.get_args(kind) if arg is not type(None)))
        return lambda value: None if value is None else inner(value)
    if origin is tuple:
        item = _decoder(typing.get_args(kind)[0])
        if item is _identity:
            return tuple
        return lambda value: tuple(item(v) for v in value)
    if origin in (dict, Mapping) or kind in (dict, Mapping):
        return dict
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        fields = [(f.name, _decoder(hints[f.name])) for f in dataclasses.fields(kind)]
        return lambda value: kind(**{name: decode(value[name]) for name, decode in fields})
    return _identity


def load_parsed(entry: str | None) -> Lockfile | None:
    """The lock stored under `entry` (from `entry_for`), or None."""
    if entry is None:
        return None
    payload = private.read_entry(entry)
    if payload is None:
        return None
    try:
        return _decoder(Lockfile)(json.loads(payload))
    except Exception:  # an entry from an older model of the lock is a miss
        return None


def store_parsed(entry: str | None, lock: Lockfile) -> None:
    """Store `lock` under `entry` (from `entry_for`); drop the oldest entries beyond `MAX_ENTRIES`."""
    if entry is None:
        return
    if private.write_entry(entry, json.dumps(_encode(lock), separators=(",", ":")).encode()):
        private.prune(_PREFIX + "-", MAX_ENTRIES)
