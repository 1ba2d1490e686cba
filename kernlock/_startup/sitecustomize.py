"""`kernlock run` puts this directory on PYTHONPATH: arm kernlock's start-up hook, then chain to any other sitecustomize.

With `KERNLOCK_APPLY=1` the lock is applied when `kernels` or `transformers` is
first imported (`kernlock.autoapply`); a process that imports neither pays
almost nothing. Without it, this file does nothing but the chaining.
"""

import os
import sys

if os.environ.get("KERNLOCK_APPLY", "").lower() in ("1", "true", "yes"):
    from kernlock.autoapply import arm

    arm()


def _chain() -> None:
    """Run the next `sitecustomize.py` on sys.path, which this one shadows."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            import importlib.util

            spec = importlib.util.spec_from_file_location("_kernlock_chained_sitecustomize", candidate)
            if spec and spec.loader:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


_chain()
