"""kernels' own JSON lock (`KernelLocks`), read and written through kernels' Rust classes, as plain
pins."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from kernlock._internal.compat.kernels_api import kernel_request, line
from kernlock._internal.host import installed_version


class KernelsPin(NamedTuple):
    """One entry of kernels' JSON lock: a dependency (repo and version or revision) and its
    commit."""

    repo: str
    version: int | None
    revision: str | None
    commit: str


def unsupported_line() -> str | None:
    """Why the installed kernels' JSON lock is not one kernlock reads or writes (kernels 0.16), or
    None."""
    if line().JSON_LOCK:
        return None
    return (
        f"kernels {installed_version('kernels')} keeps its own lock in its older format (a list "
        "of repo_id/sha): kernlock migrates and exports only kernels 0.17+'s"
    )


def parse_kernels_lock(text: str) -> list[KernelsPin]:
    """kernels' `KernelLocks` JSON as pins, in file order; raises `ValueError` if it is not one."""
    from kernels._rust import KernelLocks

    locks = KernelLocks.from_json(text)
    pins = []
    # kernels' KernelLocks is its own mapping class: only keys() is promised to give the
    # dependencies
    for dependency in locks.keys():  # noqa: SIM118
        repo, version, revision = kernel_request(dependency)
        pins.append(KernelsPin(repo, version, revision, str(locks.get(dependency).commit)))
    return pins


def kernels_lock_json(pins: Iterable[KernelsPin]) -> str:
    """kernels' `KernelLocks` JSON for `pins`; the first pin of a dependency wins."""
    from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

    locks: dict[Any, Any] = {}  # KernelDependency -> KernelLock (kernels' Rust classes, untyped)
    for pin in pins:
        version = (
            KernelVersion.Version(pin.version)
            if pin.version is not None
            else KernelVersion.Revision(pin.revision)
        )
        locks.setdefault(
            KernelDependency(repo_id=pin.repo, version=version), KernelLock(commit=pin.commit)
        )
    return KernelLocks(locks=locks).to_json()
