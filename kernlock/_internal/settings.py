"""kernlock's environment variables: every name, and the one way each kind of value is read.

`flag()` reads a boolean (`1/true/yes/on` or `0/false/no/off`, any case), `seconds()`
a positive number of seconds, `path()` a path; unset or empty is the default, and
anything else is a one-line `UsageError` naming the variable and the values it
accepts, never silently ignored. The README's "Environment variables" table lists them.

This module imports nothing of kernlock's at import (the error path imports
`kernlock.errors`), so the start-up hook can use it in every process for free.
"""

from __future__ import annotations

import math
import os

TYPE_CHECKING = False  # not typing's: the start-up hook imports this module in every process
if TYPE_CHECKING:
    from pathlib import (
        Path,  # imported where used: pathlib (with fnmatch, re, urllib) is ~7 ms of start-up
    )

    from kernlock.errors import UsageError

APPLY_ENV = "KERNLOCK_APPLY"  # apply the lock in every Python process (`kernlock run` sets it)
STRICT_ENV = "KERNLOCK_STRICT"  # the default of apply(strict=...)
VERBOSE_ENV = "KERNLOCK_VERBOSE"  # log each binding; tracebacks under the start-up hook
TARGET_ENV = "KERNLOCK_TARGET"  # simulate this target instead of detecting the environment
ALLOW_LOCAL_ENV = "KERNLOCK_ALLOW_LOCAL"  # strict mode loads LOCAL_KERNELS overrides
LOCAL_KERNELS_ENV = "LOCAL_KERNELS"  # kernels' own: repo=path[:repo=path]
LOCKFILE_ENV = "KERNLOCK_LOCKFILE"  # the lock to read instead of discovering one
VENDOR_ENV = "KERNLOCK_VENDOR_DIR"  # a vendored lock and its files
# an OCI location (`oci://HOST/NAMESPACE/NAME[:TAG][@DIGEST]`, `oci-layout:DIR`) that `apply()`,
# `kernlock run` and `kernlock sync` fetch locked files from instead of the Hub
MIRROR_ENV = "KERNLOCK_MIRROR"
# kernlock's private per-user directory: parsed locks, verified-file stamps, lock registrations
CACHE_DIR_ENV = "KERNLOCK_CACHE_DIR"
# turn that directory off: every file re-hashed, no lock registered for `kernlock cache`
NO_CACHE_ENV = "KERNLOCK_NO_CACHE"
STATE_DIR_ENV = "KERNLOCK_STATE_DIR"  # where the project mutexes live
# seconds to wait for another `kernlock lock` of the project (0: none)
MUTEX_TIMEOUT_ENV = "KERNLOCK_MUTEX_TIMEOUT"
# seconds one request or file download may take, retries and waits included
DEADLINE_ENV = "KERNLOCK_HUB_DEADLINE"
# the longest wait for a rate-limit window to reset
RATE_LIMIT_WAIT_ENV = "KERNLOCK_RATE_LIMIT_WAIT"
RANK_CHECK_ENV = "KERNLOCK_RANK_CHECK"  # the cross-rank check at init_process_group
RANK_CHECK_TIMEOUT_ENV = "KERNLOCK_RANK_CHECK_TIMEOUT"  # seconds to wait for every rank's record
# set by `kernlock lock --record`: the JSON-lines file every kernel request is appended to
RECORD_ENV = "KERNLOCK_RECORD"
# set by `kernlock run`: the interpreter kernlock itself runs in
RUN_PYTHON_ENV = "KERNLOCK_RUN_PYTHON"
# the `[tool.kernlock.groups]` a run binds, comma-separated (`kernlock run --group` sets it)
GROUPS_ENV = "KERNLOCK_GROUPS"
# let ranks of one job load different variants of the same commits
MIXED_ENV = "KERNLOCK_ALLOW_MIXED_VARIANTS"

# kernlock is installed from a checkout or a wheel
UPGRADE_FIX = (
    "upgrade kernlock: install the newer one from its checkout or wheel (`python -m pip install "
    "-U <kernlock checkout or .whl>`; kernlock is not on PyPI)"
)

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def _usage(name: str, raw: str, accepted: str, example: str) -> UsageError:
    from kernlock.errors import UsageError

    return UsageError(
        f"${name}={raw!r} is not {accepted}", fix=f"set it to e.g. {example} or unset it"
    )


def flag(name: str, default: bool) -> bool:
    """`$name` as a boolean; `default` when unset or empty."""
    raw = os.environ.get(name, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise _usage(
        name, raw, f"one of {'/'.join(TRUE)} or {'/'.join(FALSE)}", "1" if not default else "0"
    )


def seconds(name: str, default: float, *, zero: bool = False) -> float:
    """`$name` as a finite number of seconds, above 0 (or 0 too, with `zero`); `default` when unset
    or empty."""
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise _usage(
            name,
            raw,
            f"a number of seconds{' (0 or more)' if zero else ' above 0'}",
            f"{default:g}",
        )
    return value


# huggingface_hub reads them with int() at import
HUB_INT_ENVS = (
    "HF_HUB_ETAG_TIMEOUT",
    "HF_HUB_DOWNLOAD_TIMEOUT",
)


def check_hub_environment() -> None:
    """Refuse (`UsageError`) a huggingface_hub setting its import would die on
    (`HF_HUB_DOWNLOAD_TIMEOUT=abc` is a `ValueError` traceback from deep in
    `huggingface_hub.constants`), before anything imports it."""
    for name in HUB_INT_ENVS:
        raw = os.environ.get(name)
        if raw is None:
            continue
        try:
            int(raw)
        except ValueError:
            raise _usage(
                name, raw, "a whole number of seconds (huggingface_hub reads it with int())", "10"
            ) from None


def path(name: str) -> Path | None:
    """`$name` as a path (`~` expanded); None when unset or empty."""
    from pathlib import Path

    raw = os.environ.get(name, "")
    return Path(raw).expanduser() if raw else None


def text(name: str) -> str | None:
    """`$name` as it is set; None when unset or empty."""
    return os.environ.get(name) or None


def apply_requested() -> bool:
    """Whether `$KERNLOCK_APPLY` asks for the lock in every Python process (`kernlock run` sets
    it)."""
    return flag(APPLY_ENV, False)


def strict_from_env() -> bool:
    """Strict mode as `$KERNLOCK_STRICT` sets it (on by default)."""
    return flag(STRICT_ENV, True)


def verbose() -> bool:
    """Whether `$KERNLOCK_VERBOSE` asks for each binding to be logged (and tracebacks under the
    start-up hook)."""
    return flag(VERBOSE_ENV, False)


def groups_from_env() -> tuple[str, ...]:
    """The groups `$KERNLOCK_GROUPS` names (comma-separated; none when unset or empty)."""
    return tuple(name.strip() for name in os.environ.get(GROUPS_ENV, "").split(",") if name.strip())
