"""`kernlock run` puts this directory on PYTHONPATH: apply the lock, then chain to any other sitecustomize."""

import importlib.util
import os
import sys

import kernlock.autoapply  # noqa: F401  (applies the lock when KERNLOCK_APPLY=1)

_here = os.path.dirname(os.path.abspath(__file__))
for _entry in sys.path:
    if not _entry or os.path.abspath(_entry) == _here:
        continue
    _candidate = os.path.join(_entry, "sitecustomize.py")
    if os.path.isfile(_candidate):
        _spec = importlib.util.spec_from_file_location("_kernlock_chained_sitecustomize", _candidate)
        if _spec and _spec.loader:
            _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
        break
