"""kernlock's environment variables: their names and how each is read, in one place.

This module imports nothing of kernlock's, so the start-up hook can use it for free.
"""

from __future__ import annotations

import os

APPLY_ENV = "KERNLOCK_APPLY"
STRICT_ENV = "KERNLOCK_STRICT"


def apply_requested() -> bool:
    """Whether `$KERNLOCK_APPLY` asks for the lock in every Python process (`kernlock run` sets it)."""
    return os.environ.get(APPLY_ENV, "").lower() in ("1", "true", "yes")


def strict_from_env() -> bool:
    """Strict mode as `$KERNLOCK_STRICT` sets it (on by default)."""
    return os.environ.get(STRICT_ENV, "1").lower() not in ("0", "false", "no")
