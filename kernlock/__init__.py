"""kernlock: reproducible Hugging Face Hub kernels.

Public API (imported lazily so `import kernlock` stays cheap)::

    kernlock.apply()            # bind every kernel load to kernels.lock
    kernlock.loaded()           # what this process loaded under it (the run record)
    kernlock.lock(...)          # resolve specs and write kernels.lock
    kernlock.verify(...)        # check a lock: fresh, covering, intact
    kernlock.load_lockfile(p)   # parse and validate a lock file
    kernlock.sync(...), kernlock.vendor(dir, ...), kernlock.remove(...)
"""

# not typing's: the start-up hook imports this package in every process, typing costs ~8 ms
TYPE_CHECKING = False

# what type checkers see behind the lazy `__getattr__` below (`X as X`: re-exported)
if TYPE_CHECKING:
    __version__: str  # from the package metadata, when asked
    from kernlock._internal.fetch.sync import SyncReport as SyncReport
    from kernlock._internal.fetch.sync import sync as sync
    from kernlock._internal.fetch.vendor import VendorReport as VendorReport
    from kernlock._internal.fetch.vendor import vendor as vendor
    from kernlock._internal.host import current_target as current_target
    from kernlock._internal.lockfile.entries import LockedFile as LockedFile
    from kernlock._internal.lockfile.entries import LockedKernel as LockedKernel
    from kernlock._internal.lockfile.entries import LockedModel as LockedModel
    from kernlock._internal.lockfile.entries import LockedVariant as LockedVariant
    from kernlock._internal.lockfile.entries import Lockfile as Lockfile
    from kernlock._internal.lockfile.entries import Override as Override
    from kernlock._internal.lockfile.exclude_newer import ExcludeNewer as ExcludeNewer
    from kernlock._internal.lockfile.mirror import Mirror as Mirror
    from kernlock._internal.lockfile.serialize import load_lockfile as load_lockfile
    from kernlock._internal.lockfile.signing_record import Provenance as Provenance
    from kernlock._internal.lockfile.signing_record import Signature as Signature
    from kernlock._internal.resolve.changes import Change as Change
    from kernlock._internal.resolve.changes import LockResult as LockResult
    from kernlock._internal.resolve.relock import lock as lock
    from kernlock._internal.resolve.relock import remove as remove
    from kernlock._internal.rules.findings import CheckResult as CheckResult
    from kernlock._internal.rules.findings import Problem as Problem
    from kernlock._internal.runtime.apply import Applied as Applied
    from kernlock._internal.runtime.apply import apply as apply
    from kernlock._internal.runtime.apply import loaded as loaded
    from kernlock._internal.spec.kernel_spec import KernelSpec as KernelSpec
    from kernlock._internal.spec.kernel_spec import Origin as Origin
    from kernlock._internal.spec.kernel_spec import parse_spec as parse_spec
    from kernlock._internal.spec.target import Target as Target
    from kernlock._internal.spec.target import parse_target as parse_target
    from kernlock._internal.verify.checks import verify as verify
    from kernlock._internal.verify.report import VerifyReport as VerifyReport
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
    from kernlock.errors import MissingFilesError as MissingFilesError
    from kernlock.errors import ModelError as ModelError
    from kernlock.errors import NoVariantError as NoVariantError
    from kernlock.errors import ProjectBusyError as ProjectBusyError
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
    "Change": "kernlock._internal.resolve.changes",
    "ExcludeNewer": "kernlock._internal.lockfile.exclude_newer",
    "LockedKernel": "kernlock._internal.lockfile.entries",
    "LockedVariant": "kernlock._internal.lockfile.entries",
    "LockedFile": "kernlock._internal.lockfile.entries",
    "LockedModel": "kernlock._internal.lockfile.entries",
    "Override": "kernlock._internal.lockfile.entries",
    "Provenance": "kernlock._internal.lockfile.signing_record",
    "Signature": "kernlock._internal.lockfile.signing_record",
    "Mirror": "kernlock._internal.lockfile.mirror",
    "KernelSpec": "kernlock._internal.spec.kernel_spec",
    "Origin": "kernlock._internal.spec.kernel_spec",
    "SyncReport": "kernlock._internal.fetch.sync",
    "VendorReport": "kernlock._internal.fetch.vendor",
    "VerifyReport": "kernlock._internal.verify.report",
    "CheckResult": "kernlock._internal.rules.findings",
    "Problem": "kernlock._internal.rules.findings",
    "apply": "kernlock._internal.runtime.apply",
    "Applied": "kernlock._internal.runtime.apply",
    "remove": "kernlock._internal.resolve.relock",
    "sync": "kernlock._internal.fetch.sync",
    "vendor": "kernlock._internal.fetch.vendor",
    "Target": "kernlock._internal.spec.target",
    "loaded": "kernlock._internal.runtime.apply",
    "lock": "kernlock._internal.resolve.relock",
    "LockResult": "kernlock._internal.resolve.changes",
    "verify": "kernlock._internal.verify.checks",
    "load_lockfile": "kernlock._internal.lockfile.serialize",
    "Lockfile": "kernlock._internal.lockfile.entries",
    "parse_spec": "kernlock._internal.spec.kernel_spec",
    "parse_target": "kernlock._internal.spec.target",
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
    "ProjectBusyError": "kernlock.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __dir__() -> list[str]:
    return sorted(__all__)


def __getattr__(name: str) -> object:  # type checkers use the TYPE_CHECKING imports above
    if name == "__version__":
        from kernlock._internal.distribution import version

        return version()
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernlock' has no attribute {name!r}")
    # not at the top: the start-up hook imports this package in every process
    from importlib import import_module

    return getattr(import_module(module), name)
