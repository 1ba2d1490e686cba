"""kernlock: reproducible Hugging Face Hub kernels.

Public API (imported lazily so `import kernlock` stays cheap)::

    kernlock.apply()            # bind every kernel load to kernels.lock
    kernlock.lock(...)          # resolve specs and write kernels.lock
    kernlock.verify(...)        # check a lock: fresh, covering, intact
    kernlock.load_lockfile(p)   # parse and validate a lock file
"""

__version__ = "0.1.0"

_EXPORTS = {
    "apply": "kernlock.patch",
    "lock": "kernlock.locking",
    "LockResult": "kernlock.locking",
    "verify": "kernlock.check",
    "load_lockfile": "kernlock.lockfile_toml",
    "Lockfile": "kernlock.lockfile",
    "parse_spec": "kernlock.spec",
    "parse_target": "kernlock.environment",
    "current_target": "kernlock.environment",
    "KernlockError": "kernlock.errors",
    "NoVariantError": "kernlock.errors",
    "IntegrityError": "kernlock.errors",
    "UnlockedKernelError": "kernlock.errors",
    "LocalKernelError": "kernlock.errors",
    "CompatibilityError": "kernlock.errors",
    "LockfileError": "kernlock.errors",
    "ResolutionError": "kernlock.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernlock' has no attribute {name!r}")
    from importlib import import_module  # not at the top: the start-up hook imports this package in every process

    return getattr(import_module(module), name)
