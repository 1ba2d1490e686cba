"""Start-up hook: with `KERNLOCK_APPLY=1`, apply the lock when `kernels` or `transformers` is first imported.

`kernlock run` puts `kernlock/_startup` on `PYTHONPATH`; its `sitecustomize.py`
calls `arm()` when `KERNLOCK_APPLY=1`. Arming only adds a finder to
`sys.meta_path` (no kernlock module beyond this one is imported, nothing is read),
so a process that never imports `kernels` or `transformers` — `pip`, a
dataloader worker, `python -c pass` — pays well under a millisecond and can never
fail because of kernlock. The first import of either package (or a
`find_spec` for it) applies the lock before that package's code runs, so every
kernel load is bound and checked as with `kernlock.apply()`; a lock that cannot
cover this environment stops the process with one line and exit code 1, and so
does a refusal that escapes the program uncaught (an unlocked kernel inside `trl
sft`): one `kernlock: error:` line instead of the traceback of every library it
passed through (the traceback follows it with `KERNLOCK_VERBOSE=1`).
kernlock's own commands `disarm()` the hook (`kernlock lock` works with no lock yet).
"""

from __future__ import annotations

import os
import sys
from _thread import RLock

from kernlock.settings import verbose

TYPE_CHECKING = False  # not typing's: importing typing in every process is start-up cost; type checkers know the name
if TYPE_CHECKING:
    from collections.abc import Callable

TRIGGERS = frozenset({"kernels", "transformers"})
STARTUP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_startup")  # `kernlock run` puts it on PYTHONPATH
_lock = RLock()


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
    """Apply the lock at the first import of `kernels` or `transformers` in this process; refusals print in one line."""
    if not any(isinstance(finder, ApplyOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, ApplyOnImport())
        sys.excepthook = _refusals_in_one_line(sys.excepthook)


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


def _refusals_in_one_line(previous: Callable[..., object]) -> Callable[..., None]:
    """An excepthook that prints an uncaught kernlock refusal, however wrapped, as its one `kernlock: error:` line.

    A failure that only carries such a line (a launcher re-raising its child's
    stderr, as `accelerate launch` under `trl sft` does) adds no traceback: the
    child already printed the line. `KERNLOCK_VERBOSE=1` adds the traceback.
    """

    def hook(kind: type[BaseException], value: BaseException, traceback: object) -> None:
        from kernlock.errors import KernlockError

        chain: list[BaseException] = []
        error: BaseException | None = value
        while error is not None and error not in chain:
            chain.append(error)
            error = error.__cause__ or error.__context__
        refusal = next((e for e in chain if isinstance(e, KernlockError)), None)
        relayed = any("kernlock: error: " in f"{e} {getattr(e, 'stderr', '')}" for e in chain)
        if refusal is None and not relayed:
            previous(kind, value, traceback)
            return
        if refusal is not None:
            sys.stderr.write(f"kernlock: error: {refusal}\n")
        if verbose():
            previous(kind, value, traceback)

    return hook
