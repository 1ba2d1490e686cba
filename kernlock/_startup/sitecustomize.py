"""`kernlock run` puts this directory on PYTHONPATH: arm kernlock's start-up hook, then chain to any other sitecustomize.

With `KERNLOCK_APPLY=1` the lock is applied when `kernels` or `transformers` is
first imported (`kernlock.autoapply`); a process that imports neither pays
almost nothing. A Python that cannot import kernlock (another environment) stops
at that import instead, with one line naming the fix: it never loads a kernel
without the lock. Without `KERNLOCK_APPLY`, this file does nothing but the chaining.

The chain is idempotent: it runs the first `sitecustomize.py` below this one that
is not a kernlock start-up file (another environment's kernlock start-up dir on
`PYTHONPATH` is skipped, not chained back and forth), and at most once per process.
"""

# kernlock-startup-hook (this marker names the file to other kernlock start-up dirs' chains)

import os
import sys


class _NoKernlock:
    """A meta-path finder for a Python without kernlock: the first import of kernels or transformers exits."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname in ("kernels", "transformers"):
            sys.stderr.write(
                f"kernlock: error: kernlock run applies the lock in every Python process, but {sys.executable} "
                f"cannot import kernlock ({self.reason}), so {fullname} would load kernels without the lock; "
                f"install kernlock in that environment (`{sys.executable} -m pip install kernlock`)\n"
            )
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(1)  # inside an import: an exception could be swallowed by `try: import …`
        return None


if os.environ.get("KERNLOCK_APPLY", "").lower() in ("1", "true", "yes"):
    try:
        from kernlock.autoapply import arm
    except ImportError as error:
        sys.meta_path.insert(0, _NoKernlock(str(error)))
    else:
        arm(os.path.dirname(os.path.abspath(__file__)))


def _chain() -> None:
    """Run the next `sitecustomize.py` on sys.path, which this one shadows."""
    if "_kernlock_startup_chain" in sys.modules:  # chained back into by an older kernlock's start-up dir
        return
    sys.modules["_kernlock_startup_chain"] = type(sys)("_kernlock_startup_chain")
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            if _is_kernlock_startup(candidate):
                continue
            import importlib.util

            spec = importlib.util.spec_from_file_location("_kernlock_chained_sitecustomize", candidate)
            if spec and spec.loader:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


def _is_kernlock_startup(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            return b"# kernlock-startup-hook" in file.read(4096)
    except OSError:
        return False


_chain()
