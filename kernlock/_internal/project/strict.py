"""Strict mode: whether `kernlock.apply()` refuses kernels it cannot bind to the lock.

`$KERNLOCK_STRICT` (on unless `0`, `false` or `no`) is the default of
`apply(strict=...)`; `kernlock run --lenient` sets it to `0`, and `kernlock verify`
judges `LOCAL_KERNELS` overrides the way `apply()` will under it. A refusal names
the way out that works where it happened (`lenient_hint`).
"""

from __future__ import annotations

from kernlock._internal.settings import STRICT_ENV, apply_requested, strict_from_env

__all__ = ["STRICT_ENV", "lenient_hint", "strict_from_env"]


def lenient_hint() -> str:
    """How to let unlocked kernels load here: `kernlock run --lenient` under the start-up hook, else
    `apply(strict=False)`."""
    # under `kernlock run` (or its exported environment) the user's code may not call apply()
    if apply_requested():
        return (
            f"or rerun with `kernlock run --lenient -- …` ({STRICT_ENV}=0) to let unlocked kernels "
            "load as usual"
        )
    return "or call kernlock.apply(strict=False) to let unlocked kernels load as usual"
