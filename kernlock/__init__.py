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

# not typing's: the start-up hook imports this package in every process, typing costs ~8 ms
TYPE_CHECKING = False

# what type checkers see behind the lazy `__getattr__` below (`X as X`: re-exported)
if TYPE_CHECKING:
    from kernlock._internal.check.verify import verify as verify
    from kernlock._internal.fetch.sync import sync as sync
    from kernlock._internal.fetch.vendor import vendor as vendor
    from kernlock._internal.host import current_target as current_target
    from kernlock._internal.lockfile.model import Lockfile as Lockfile
    from kernlock._internal.lockfile.serialize import load_lockfile as load_lockfile
    from kernlock._internal.model.spec import parse_spec as parse_spec
    from kernlock._internal.model.target import Target as Target
    from kernlock._internal.model.target import parse_target as parse_target
    from kernlock._internal.resolve.changes import LockResult as LockResult
    from kernlock._internal.resolve.relock import lock as lock
    from kernlock._internal.resolve.relock import remove as remove
    from kernlock._internal.runtime.apply import Applied as Applied
    from kernlock._internal.runtime.apply import apply as apply
    from kernlock._internal.runtime.apply import loaded as loaded
    from kernlock.errors import CompatibilityError as CompatibilityError
    from kernlock.errors import ConfigError as ConfigError
    from kernlock.errors import GpuArchError as GpuArchError
    from kernlock.errors import HubError as HubError
    from kernlock.errors import IntegrityError as IntegrityError
    from kernlock.errors import KernlockError as KernlockError
    from kernlock.errors import LocalKernelError as LocalKernelError
    from kernlock.errors import LockfileError as LockfileError
    from kernlock.errors import LockfileNotFoundError as LockfileNotFoundError
    from kernlock.errors import LockfileVersionError as LockfileVersionError
    from kernlock.errors import LockTimeoutError as LockTimeoutError
    from kernlock.errors import MissingFilesError as MissingFilesError
    from kernlock.errors import ModelError as ModelError
    from kernlock.errors import NoVariantError as NoVariantError
    from kernlock.errors import RankMismatchError as RankMismatchError
    from kernlock.errors import ResolutionError as ResolutionError
    from kernlock.errors import SignatureError as SignatureError
    from kernlock.errors import SpecError as SpecError
    from kernlock.errors import StaleLockError as StaleLockError
    from kernlock.errors import TargetError as TargetError
    from kernlock.errors import TrustError as TrustError
    from kernlock.errors import UnlockedKernelError as UnlockedKernelError
    from kernlock.errors import UnsafeLockfileError as UnsafeLockfileError
    from kernlock.errors import UsageError as UsageError
    from kernlock.errors import VariantMismatchError as VariantMismatchError
    from kernlock.errors import WriteError as WriteError

_EXPORTS = {
    "apply": "kernlock._internal.runtime.apply",
    "Applied": "kernlock._internal.runtime.apply",
    "remove": "kernlock._internal.resolve.relock",
    "sync": "kernlock._internal.fetch.sync",
    "vendor": "kernlock._internal.fetch.vendor",
    "Target": "kernlock._internal.model.target",
    "loaded": "kernlock._internal.runtime.apply",
    "lock": "kernlock._internal.resolve.relock",
    "LockResult": "kernlock._internal.resolve.changes",
    "verify": "kernlock._internal.check.verify",
    "load_lockfile": "kernlock._internal.lockfile.serialize",
    "Lockfile": "kernlock._internal.lockfile.model",
    "parse_spec": "kernlock._internal.model.spec",
    "parse_target": "kernlock._internal.model.target",
    "current_target": "kernlock._internal.host",
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
    # not at the top: the start-up hook imports this package in every process
    from importlib import import_module

    return getattr(import_module(module), name)
