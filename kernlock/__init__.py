"""kernlock: reproducible Hugging Face Hub kernels.

Public API (imported lazily so `import kernlock` stays cheap)::

    kernlock.apply()            # bind every kernel load to kernels.lock
    kernlock.loaded()           # what this process loaded under it (the run record)
    kernlock.lock(...)          # resolve specs and write kernels.lock
    kernlock.verify(...)        # check a lock: fresh, covering, intact
    kernlock.load_lockfile(p)   # parse and validate a lock file
    kernlock.sync(...), kernlock.vendor(dir, ...), kernlock.remove(...)
"""

__version__ = "0.1.0"

TYPE_CHECKING = False  # not typing's: the start-up hook imports this package in every process, typing costs ~8 ms

if TYPE_CHECKING:  # what type checkers see behind the lazy `__getattr__` below (`X as X`: re-exported)
    from kernlock.check.verify import verify as verify
    from kernlock.model.target import current_target as current_target
    from kernlock.model.target import parse_target as parse_target
    from kernlock.errors import CompatibilityError as CompatibilityError
    from kernlock.errors import ConfigError as ConfigError
    from kernlock.errors import HubError as HubError
    from kernlock.errors import IntegrityError as IntegrityError
    from kernlock.errors import KernlockError as KernlockError
    from kernlock.errors import LocalKernelError as LocalKernelError
    from kernlock.errors import LockTimeoutError as LockTimeoutError
    from kernlock.errors import LockfileError as LockfileError
    from kernlock.errors import LockfileNotFoundError as LockfileNotFoundError
    from kernlock.errors import LockfileVersionError as LockfileVersionError
    from kernlock.errors import MissingFilesError as MissingFilesError
    from kernlock.errors import ModelError as ModelError
    from kernlock.errors import NoVariantError as NoVariantError
    from kernlock.errors import GpuArchError as GpuArchError
    from kernlock.errors import RankMismatchError as RankMismatchError
    from kernlock.errors import SignatureError as SignatureError
    from kernlock.errors import ResolutionError as ResolutionError
    from kernlock.errors import SpecError as SpecError
    from kernlock.errors import StaleLockError as StaleLockError
    from kernlock.errors import TargetError as TargetError
    from kernlock.errors import TrustError as TrustError
    from kernlock.errors import UnlockedKernelError as UnlockedKernelError
    from kernlock.errors import UnsafeLockfileError as UnsafeLockfileError
    from kernlock.errors import UsageError as UsageError
    from kernlock.errors import VariantMismatchError as VariantMismatchError
    from kernlock.errors import WriteError as WriteError
    from kernlock.model.lockfile import Lockfile as Lockfile
    from kernlock.store.lockfile_io import load_lockfile as load_lockfile
    from kernlock.resolve.lock import LockResult as LockResult
    from kernlock.resolve.lock import lock as lock
    from kernlock.resolve.lock import remove as remove
    from kernlock.fetch.sync import sync as sync
    from kernlock.fetch.vendor import vendor as vendor
    from kernlock.model.target import Target as Target
    from kernlock.runtime.apply import Applied as Applied
    from kernlock.runtime.apply import apply as apply
    from kernlock.runtime.apply import loaded as loaded
    from kernlock.model.spec import parse_spec as parse_spec

_EXPORTS = {
    "apply": "kernlock.runtime.apply",
    "Applied": "kernlock.runtime.apply",
    "remove": "kernlock.resolve.lock",
    "sync": "kernlock.fetch.sync",
    "vendor": "kernlock.fetch.vendor",
    "Target": "kernlock.model.target",
    "loaded": "kernlock.runtime.apply",
    "lock": "kernlock.resolve.lock",
    "LockResult": "kernlock.resolve.lock",
    "verify": "kernlock.check.verify",
    "load_lockfile": "kernlock.store.lockfile_io",
    "Lockfile": "kernlock.model.lockfile",
    "parse_spec": "kernlock.model.spec",
    "parse_target": "kernlock.model.target",
    "current_target": "kernlock.model.target",
    "KernlockError": "kernlock.errors",
    "UsageError": "kernlock.errors",
    "SpecError": "kernlock.errors",
    "TargetError": "kernlock.errors",
    "ConfigError": "kernlock.errors",
    "WriteError": "kernlock.errors",
    "LockfileError": "kernlock.errors",
    "LockfileVersionError": "kernlock.errors",
    "UnsafeLockfileError": "kernlock.errors",
    "LockfileNotFoundError": "kernlock.errors",
    "StaleLockError": "kernlock.errors",
    "ResolutionError": "kernlock.errors",
    "HubError": "kernlock.errors",
    "TrustError": "kernlock.errors",
    "NoVariantError": "kernlock.errors",
    "GpuArchError": "kernlock.errors",
    "UnlockedKernelError": "kernlock.errors",
    "LocalKernelError": "kernlock.errors",
    "IntegrityError": "kernlock.errors",
    "MissingFilesError": "kernlock.errors",
    "ModelError": "kernlock.errors",
    "CompatibilityError": "kernlock.errors",
    "VariantMismatchError": "kernlock.errors",
    "RankMismatchError": "kernlock.errors",
    "SignatureError": "kernlock.errors",
    "LockTimeoutError": "kernlock.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __dir__() -> list[str]:
    return sorted(__all__)


def __getattr__(name: str) -> object:  # type checkers use the TYPE_CHECKING imports above
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernlock' has no attribute {name!r}")
    from importlib import import_module  # not at the top: the start-up hook imports this package in every process

    return getattr(import_module(module), name)
