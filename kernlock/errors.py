"""Error types. Every error kernlock raises on purpose is a `KernlockError`, and every public one is
here.

Each names the problem in one line and keeps the fix as data (`fix`, as pip's
`DiagnosticPipError` does): `str(error)` is `problem; fix: fix`, which the CLI
prints without a traceback, exiting with the error's `exit_code`; `verify` and
`--json` take `message` and `fix` apart instead of parsing the text.
"""

from __future__ import annotations

import enum
import os
import re
from typing import Any, Final

# Compiled on first use (through `re`'s cache), not at import: every `apply()` imports this module.
_URL_CREDENTIALS = r"(?<=://)[^/\s@]+@"
_SECRET_PARAMS = (
    r"(?i)([?&](?:token|access_token|api_key|key|signature|x-amz-signature|x-amz-credential|x-amz-security-token"
    r"|key-pair-id|policy)=)[^&\s'\"<>]+"
)
_HF_TOKEN = r"\bhf_[A-Za-z0-9]{20,}"


def redact(text: str) -> str:
    """`text` with credentials replaced by `***`: `user:password@` in URLs, secret query parameters,
    HF tokens."""
    text = re.sub(_URL_CREDENTIALS, "***@", text)
    return re.sub(_HF_TOKEN, "hf_***", re.sub(_SECRET_PARAMS, r"\1***", text))


class _NoFix(enum.Enum):
    NO_FIX = "NO_FIX"

    def __repr__(self) -> str:
        return "NO_FIX"


NO_FIX: Final = _NoFix.NO_FIX
"""The `fix=` of an error the user can do nothing about: written at the call site, with a comment
saying why.

Every error takes `fix` as a required keyword (a test reads every construction in `kernlock/`), so
that a missing fix is a decision, never a default. `error.fix` is then None.
"""

Fix = str | _NoFix
"""What `fix=` takes: the action that removes the problem (a command, a setting, an edit), or
`NO_FIX`."""


def _restore(
    cls: type[KernlockError], args: tuple[Any, ...], state: dict[str, Any]
) -> KernlockError:
    """Unpickle an error without calling its constructor (whose keywords are required)."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class KernlockError(Exception):
    """Base class of kernlock's errors; their messages never show credentials (see `redact`).

    `problem` says what is wrong and `fix` what to do about it, kept apart as pip's
    `DiagnosticPipError` keeps `context` and `hint_stmt` and uv prints `hint:` under its error.
    """

    exit_code = 1

    def __init__(self, problem: str, *, fix: Fix) -> None:
        super().__init__(problem)
        self.fix: str | None = None if fix is NO_FIX else fix

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross process boundaries (ranks, pools) intact, whatever their constructor
        # requires.
        return _restore, (type(self), self.args, self.__dict__)

    @property
    def message(self) -> str:
        """The problem alone, without the fix."""
        return redact(super().__str__())

    @property
    def fix_text(self) -> str | None:
        """The fix, with credentials redacted (None when there is none)."""
        return redact(self.fix) if self.fix else None

    def __str__(self) -> str:
        if not self.fix:
            return self.message
        message = self.message
        return (
            f"{message}\nfix: {self.fix_text}"
            if "\n" in message
            else f"{message}; fix: {self.fix_text}"
        )


class UsageError(KernlockError):
    """Bad input from the user: a spec, a target string, a config key."""

    exit_code = 2


class SpecError(UsageError):
    """A kernel spec string does not parse."""


class TargetError(UsageError):
    """A target string does not parse."""


class ConfigError(UsageError):
    """`pyproject.toml` or another source of specs is malformed."""


def key_text(key_path: tuple[str | int, ...]) -> str:
    """A key path spelled the way the lock reads: `("kernel", 2, "files", 0)` →
    `kernel[2].files[0]`."""
    text = ""
    for part in key_path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
    return text


class ModelError(UsageError):
    """A model declared in `[tool.kernlock] models` cannot be built from its config."""


class WriteError(KernlockError):
    """A file kernlock replaces could not be written (disk full, read-only); the old file is
    unchanged."""


def local_write_problem(
    error: BaseException, cache: os.PathLike[str] | str
) -> tuple[str, str] | None:
    """(problem, fix) of a failure to write into `cache` (the Hub cache) when it is this machine's
    disk, not the Hub; else None."""
    import errno

    if not isinstance(error, OSError) or error.errno is None:
        return None
    where = error.filename or cache
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"the disk holding {where} is full ({error.strerror})",
            "free space, or point HF_HUB_CACHE at another disk",
        )
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (
            f"the cache {cache} is not writable ({error.strerror}: {where})",
            "run `kernlock sync` as a user who can write it, or point HF_HUB_CACHE at a writable "
            "directory",
        )
    if error.errno == errno.ENAMETOOLONG:
        return (
            f"a file name in the cache {cache} is too long for its file system ({where})",
            "point HF_HUB_CACHE at a directory on a file system that allows longer names",
        )
    return None


class LockfileError(KernlockError):
    """`kernels.lock` is missing, unreadable or invalid.

    An invalid value carries its location as data: `key_path` (e.g. `("kernel", 2,
    "variant", 0, "files", 0, "sha256")`) and `source` (the lock file, or `file:line`).
    The message is one line: location, `problem`, then `fix` when there is one.
    """

    exit_code = 2

    def __init__(
        self,
        problem: str,
        *,
        key_path: tuple[str | int, ...] = (),
        source: str | None = None,
        fix: Fix,
    ):
        self.problem, self.key_path, self.source = problem, tuple(key_path), source
        location = ": ".join(part for part in (source, self.key) if part)
        super().__init__(f"{location + ': ' if location else ''}{problem}", fix=fix)

    @property
    def located(self) -> str:
        """The message without its fix: location, then `problem` (for reports that print the fix
        apart)."""
        location = ": ".join(part for part in (self.source, self.key) if part)
        return f"{location + ': ' if location else ''}{self.problem}"

    @property
    def key(self) -> str:
        """`key_path` spelled the way the lock reads (see `key_text`)."""
        return key_text(self.key_path)

    def under(self, *keys: str | int) -> LockfileError:
        """The same error, located inside `keys` (a parent prefixes its key to a nested error)."""
        # NO_FIX only where the error it copies had none: a copy keeps its fix, never invents one
        return type(self)(
            self.problem,
            key_path=(*keys, *self.key_path),
            source=self.source,
            fix=self.fix or NO_FIX,
        )

    def in_file(self, source: str) -> LockfileError:
        """The same error, naming the file (or `file:line`) it was found in."""
        # as in `under`
        return type(self)(
            self.problem, key_path=self.key_path, source=source, fix=self.fix or NO_FIX
        )


class LockfileVersionError(LockfileError):
    """The lock was written in a newer format than this kernlock reads; it is never overwritten."""


class UnsafeLockfileError(LockfileError):
    """A discovered lock is owned by another user or sits where others can replace it."""


class LockfileNotFoundError(LockfileError):
    """No `kernels.lock` was found where kernlock looked."""


class StaleLockError(KernlockError):
    """The lock no longer matches the project's sources and `--locked` / `locked=True` asked for a
    fresh one."""


class ResolutionError(KernlockError):
    """A spec could not be resolved against the Hub."""


class HubError(ResolutionError):
    """The Hub could not be reached or answered with an error."""


class TrustError(ResolutionError):
    """A kernel's publisher is not trusted and the project does not allow it (`repo`)."""

    def __init__(self, problem: str, *, repo: str, fix: Fix):
        super().__init__(problem, fix=fix)
        self.repo = repo

    @classmethod
    def untrusted(cls, repo: str, rerun: str = "") -> TrustError:
        """The refusal of `repo`'s publisher; `rerun` is the rest of the `kernlock lock` command to
        repeat with the fix (its specs and options, which a refused lock did not record)."""
        return cls(
            f"{repo}: publisher {repo.split('/', 1)[0]!r} is not a trusted kernel publisher; "
            "review the kernel",
            repo=repo,
            fix=f"`kernlock lock {rerun + ' ' if rerun else ''}--trust {repo}` "
            "(recorded in [tool.kernlock] trust of pyproject.toml)",
        )


class SignatureError(ResolutionError):
    """A variant's signature bundle does not verify, or its signer is not one the project allows."""


class NoVariantError(KernlockError):
    """A kernel has no build variant for an environment."""


class GpuArchError(NoVariantError, RuntimeError):
    """A locked build does not support a GPU architecture it must run on (a declared `gpu-archs`, or
    this device).

    Also a `RuntimeError`, as kernels' `ArchValidator` raises: `has_kernel` still answers False for
    it.
    """


class UnlockedKernelError(KernlockError):
    """A kernel was loaded that the lock does not cover (strict mode)."""


class LocalKernelError(UnlockedKernelError):
    """A local kernel (`LOCAL_KERNELS`, `get_local_kernel`) was loaded under strict mode without
    `KERNLOCK_ALLOW_LOCAL=1`."""


class IntegrityError(KernlockError):
    """A cached kernel file does not match the hash recorded in the lock."""


class MissingFilesError(KernlockError):
    """Locked files are not in the cache and cannot be downloaded."""


class CompatibilityError(KernlockError):
    """The installed packages or interpreter cannot load the locked kernels (see `kernlock
    verify`)."""


class VariantMismatchError(KernlockError):
    """kernels would load a different build variant than the lock records."""


class RankMismatchError(KernlockError):
    """Ranks of one job would load different kernel builds (or did not all apply the lock)."""


class ProjectBusyError(KernlockError):
    """Another kernlock process held the project mutex (`.kernlock.mutex`) for longer than the
    timeout."""


__all__ = [  # every public error (kernlock re-exports each)
    "KernlockError",
    "UsageError",
    "SpecError",
    "TargetError",
    "ConfigError",
    "ModelError",
    "WriteError",
    "LockfileError",
    "LockfileVersionError",
    "UnsafeLockfileError",
    "LockfileNotFoundError",
    "StaleLockError",
    "ResolutionError",
    "HubError",
    "TrustError",
    "SignatureError",
    "NoVariantError",
    "GpuArchError",
    "UnlockedKernelError",
    "LocalKernelError",
    "IntegrityError",
    "MissingFilesError",
    "CompatibilityError",
    "VariantMismatchError",
    "RankMismatchError",
    "ProjectBusyError",
]
