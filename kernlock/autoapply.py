"""Start-up hook: with `KERNLOCK_APPLY=1`, apply the lock when `kernels` or `transformers` is first imported.

`kernlock run` puts `kernlock/_startup` on `PYTHONPATH`; its `sitecustomize.py`
calls `arm()` when `KERNLOCK_APPLY=1`. Arming only adds a finder to
`sys.meta_path` (no kernlock module beyond this one is imported, nothing is read),
so a process that never imports `kernels` or `transformers` — `pip`, a
dataloader worker, `python -c pass` — pays well under a millisecond and can never
fail because of kernlock. The first import of either package (or a
`find_spec` for it) applies the lock before that package's code runs, so every
kernel load is bound and checked as with `kernlock.apply()`; a lock that cannot
cover this environment stops the process with one line and exit code 1.
kernlock's own commands `disarm()` the hook (`kernlock lock` works with no lock yet).
"""

import os
import sys
from _thread import RLock

APPLY_ENV = "KERNLOCK_APPLY"
TRIGGERS = frozenset({"kernels", "transformers"})
_lock = RLock()


def requested() -> bool:
    """Whether `$KERNLOCK_APPLY` asks for the lock in every Python process."""
    return os.environ.get(APPLY_ENV, "").lower() in ("1", "true", "yes")


class ApplyOnImport:
    """A meta-path finder that finds nothing: it applies the lock on the first import of a trigger."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname in TRIGGERS and self in sys.meta_path:
            with _lock:
                if self in sys.meta_path:
                    disarm()
                    _apply_or_exit()
        return None


def arm() -> None:
    """Apply the lock at the first import of `kernels` or `transformers` in this process."""
    if not any(isinstance(finder, ApplyOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, ApplyOnImport())


def disarm() -> None:
    """Remove the start-up hook from this process (kernlock's own commands)."""
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, ApplyOnImport)]


def _apply_or_exit() -> None:
    from kernlock.errors import KernlockError
    from kernlock.patch import active_lock, apply

    if active_lock() is not None:
        return
    try:
        apply()
    except KernlockError as error:
        sys.stderr.write(f"kernlock: error: {error}\n")
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(1)  # inside an import: an exception could be swallowed by `try: import …` and the lock skipped
