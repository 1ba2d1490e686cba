"""Strict mode: whether `kernlock.apply()` refuses kernels it cannot bind to the lock.

`$KERNLOCK_STRICT` (on unless `0`, `false` or `no`) is the default of
`apply(strict=...)`; `kernlock run --lenient` sets it to `0`, and `kernlock verify`
judges `LOCAL_KERNELS` overrides the way `apply()` will under it.
"""

from __future__ import annotations

import os

STRICT_ENV = "KERNLOCK_STRICT"


def strict_from_env() -> bool:
    """Strict mode as `$KERNLOCK_STRICT` sets it (on by default)."""
    return os.environ.get(STRICT_ENV, "1").lower() not in ("0", "false", "no")
