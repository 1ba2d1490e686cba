"""The lock's format version: which "major.minor" this kernlock writes, which one a lock needs, and
how a lock's `version` value is read."""

from __future__ import annotations

import re
from typing import Any

from kernlock._internal.lockfile.table import REGENERATE, ensure, invalid
from kernlock._internal.settings import UPGRADE_FIX
from kernlock.errors import LockfileVersionError

# major.minor of the newest format this kernlock reads and writes (1.1: variants' `signature`;
LOCK_VERSION = "1.7"
# 1.2: `[[model]]`, entries' `devices` and `used-by`; 1.3: variants' `archs`; 1.4: entries'
# `native` and `source`; 1.5: `[exclude-newer]`; 1.6: `[[mirror]]`; 1.7: `groups`)

_FORMAT_RE = re.compile(r"\d+\.\d+")


def format_version(value: str) -> tuple[int, int]:
    """`"1.0"` → `(1, 0)`."""
    major, _, minor = value.partition(".")
    return int(major), int(minor or 0)


def read_version(value: Any) -> str:
    """The lock's format version as "major.minor" (the integer 1 of older locks is "1.0")."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = f"{value}.0"
    if not isinstance(value, str) or not _FORMAT_RE.fullmatch(value):
        raise invalid(
            f'expected a format version like "{LOCK_VERSION}", got {value!r}',
            "version",
            fix=REGENERATE,
        )
    if format_version(value)[0] > format_version(LOCK_VERSION)[0]:
        raise LockfileVersionError(
            f"lock format version {value} is newer than this kernlock understands ({LOCK_VERSION})",
            key_path=("version",),
            fix=UPGRADE_FIX,
        )
    ensure(
        format_version(value)[0] == format_version(LOCK_VERSION)[0],
        "version",
        f"unsupported lock format version {value}",
        fix=REGENERATE,
    )
    return value
