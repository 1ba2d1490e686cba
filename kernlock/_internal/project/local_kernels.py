"""`LOCAL_KERNELS` under a lock: never silent.

kernels lets `LOCAL_KERNELS=org/repo=/path[:…]` replace a Hub kernel with a local
build, and `get_local_kernel(path)` load one directly. kernlock cannot check a
local build against the lock, so under `kernlock.apply()`:

* strict (the default): refused (`LocalKernelError`) unless `KERNLOCK_ALLOW_LOCAL=1`;
* allowed or lenient: honoured for every kernels entry point, with a one-line
  warning naming the repo, the path and the locked commit it replaces;
* `kernlock verify` reports each override (a problem when strict would refuse it).
"""

from __future__ import annotations

from pathlib import Path

from kernlock._internal.compat.kernels_api import local_kernel_overrides
from kernlock._internal.project.strict import lenient_hint
from kernlock._internal.settings import ALLOW_LOCAL_ENV, LOCAL_KERNELS_ENV, flag, text
from kernlock.errors import KernlockError


def allowed() -> bool:
    """Whether `KERNLOCK_ALLOW_LOCAL` lets strict mode load local kernels."""
    return flag(ALLOW_LOCAL_ENV, False)


def overrides() -> dict[str, Path]:
    """`LOCAL_KERNELS` as `{repo: path}`; raises `KernlockError` on a malformed value."""
    try:
        return local_kernel_overrides(text(LOCAL_KERNELS_ENV))
    except ValueError as error:
        raise KernlockError(
            f"{LOCAL_KERNELS_ENV} is malformed ({error})",
            fix=f"{LOCAL_KERNELS_ENV}=org/repo=/path[:org/repo=/path]",
        ) from None


def refusal(what: str) -> tuple[str, str]:
    """The strict refusal of `what` (a local kernel), and how to get past it."""
    return (
        f"{what}, which kernlock cannot check against the lock",
        f"set {ALLOW_LOCAL_ENV}=1 to allow local kernels (or unset {LOCAL_KERNELS_ENV}, "
        f"{lenient_hint()})",
    )


def verify_findings(repos: set[str], strict: bool) -> list[tuple[bool, str, str]]:
    """`(blocking, message, fix)` for each `LOCAL_KERNELS` override, as `kernlock verify` reports
    them.

    Blocking when strict `apply()` would refuse it; `repos` are the locked repos.
    """
    try:
        found = overrides()
    except KernlockError as error:
        return [(True, error.message, error.fix or "")]
    findings = []
    for repo, path in sorted(found.items()):
        what = (
            f"{LOCAL_KERNELS_ENV} overrides {repo} with {path} "
            f"({'locked' if repo in repos else 'not in the lock'})"
        )
        if strict and not allowed():
            findings.append(
                (
                    True,
                    f"{what}: strict kernlock.apply() refuses it",
                    f"set {ALLOW_LOCAL_ENV}=1 to allow it, or unset {LOCAL_KERNELS_ENV}",
                )
            )
        else:
            findings.append(
                (False, f"{what}: kernlock.apply() loads it unchecked, with a warning", "")
            )
    return findings
