"""Start-up hook: apply the lock in every Python process when `KERNLOCK_APPLY=1`.

Runs from `kernlock-autoapply.pth` (installed into site-packages with the
wheel) and from `kernlock/_startup/sitecustomize.py` (which `kernlock run` puts
on `PYTHONPATH`). Does nothing, and imports nothing, unless the variable is set.
A lock that cannot cover this environment stops the process with one line.
"""

from __future__ import annotations

import os
import sys

APPLY_ENV = "KERNLOCK_APPLY"


def run_hook() -> None:
    """Apply the lock if `KERNLOCK_APPLY` asks for it; exit 1 with one line on failure."""
    if os.environ.get(APPLY_ENV, "").lower() not in ("1", "true", "yes"):
        return
    from kernlock.patch import active_lock, apply

    if active_lock() is not None:
        return
    from kernlock.errors import KernlockError

    try:
        apply()
    except KernlockError as error:
        sys.stderr.write(f"kernlock: error: {error}\n")
        sys.stderr.flush()
        os._exit(1)  # site-time: SystemExit would be swallowed or garbled by site.py


run_hook()
