"""Compatibility doctor: environment problems that would break kernel loading, found before GPU
time.

Checks, each a `Finding` with the package, installed and required versions and
a fix that pip can install:

* the installed `kernels` is one this kernlock supports (`SUPPORTED_KERNELS`);
* the installed `kernels` lies in the installed Transformers' accepted window
  (`KERNELS_MIN_VERSION <= kernels < KERNELS_MAX_VERSION`; outside it
  Transformers silently skips Hub kernels); when no supported kernels is in that
  window, the fix is a Transformers release that accepts one (`SUPPORTED_TRANSFORMERS`);
* each locked variant's `kernels-minver` is met by the installed kernels;
* each locked variant's Python dependencies (`python-depends`) are importable;
* this interpreter can load arch kernels (free-threaded Python before 3.15 cannot);
* `HF_HUB_DISABLE_TELEMETRY=1` without `HF_HUB_USER_AGENT_ORIGIN` under kernels
  0.17 and huggingface_hub ≥ 2.4, which makes every unlocked kernels request fail
  ("could not verify publisher trust status").

Nothing here imports torch, transformers, kernels or huggingface_hub.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from kernlock._internal.compat.transformers import installed_transformers, kernels_window
from kernlock._internal.distribution import version
from kernlock._internal.host import installed_version
from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant, Lockfile
from kernlock._internal.settings import TRUE
from kernlock._internal.spec.target import Target
from kernlock.errors import CompatibilityError

# The kernels releases this kernlock works with, as a [min, max) window like Transformers' own
# (pyproject.toml's dependency; every release in it is a matrix cell: 0.16.2, 0.17.0-0.17.2,
# 0.18.3, 0.19.1), and the Transformers releases whose accepted kernels window overlaps it and
# that a matrix cell ran (5.17-5.25).
SUPPORTED_KERNELS = ("0.16.2", "0.20")
SUPPORTED_TRANSFORMERS = ("5.17", "5.26")


class Finding(NamedTuple):
    """One compatibility problem and its fix; `blocking` ones stop `apply()`."""

    message: str
    fix: str
    blocking: bool = True


def _parse(version: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version)
    except InvalidVersion:
        return None


def _window(name: str, window: tuple[str, str]) -> str:
    return f"{name}>={window[0]},<{window[1]}"


def _pip(*windows: tuple[str, tuple[str, str]]) -> str:
    return "pip install " + " ".join(f"'{_window(name, window)}'" for name, window in windows)


def _overlap(window: tuple[str, str]) -> tuple[str, str] | None:
    """The part of a kernels window that this kernlock supports, if any."""
    bounds = [*window, *SUPPORTED_KERNELS]
    if any(_parse(v) is None for v in bounds):
        return None
    low = max(window[0], SUPPORTED_KERNELS[0], key=_parse)
    high = min(window[1], SUPPORTED_KERNELS[1], key=_parse)
    return (low, high) if _parse(low) < _parse(high) else None


def _outside(version: str, window: tuple[str, str]) -> bool:
    parsed = _parse(version)
    return parsed is not None and not (_parse(window[0]) <= parsed < _parse(window[1]))


def kernels_support_finding() -> Finding | None:
    """The installed kernels is not a release this kernlock works with."""
    kernels = installed_version("kernels")
    if kernels is None or not _outside(kernels, SUPPORTED_KERNELS):
        return None
    window = kernels_window() if installed_transformers().version else None
    overlap = _overlap(window) if window else None
    # this Transformers accepts no supported kernels: change both
    if window is not None and overlap is None:
        fix = _pip(("kernels", SUPPORTED_KERNELS), ("transformers", SUPPORTED_TRANSFORMERS))
    else:
        fix = _pip(("kernels", overlap or SUPPORTED_KERNELS))
    return Finding(
        f"kernlock {version()} supports {_window('kernels', SUPPORTED_KERNELS)}; installed "
        f"kernels {kernels}",
        fix,
    )


def kernels_window_finding() -> Finding | None:
    """The installed kernels outside the installed Transformers' accepted window."""
    kernels, transformers = installed_version("kernels"), installed_transformers().version
    window = kernels_window()
    if kernels is None or transformers is None or window is None or not _outside(kernels, window):
        return None
    message = (
        f"kernels {kernels} is outside the window transformers {transformers} accepts "
        f"(>={window[0]},<{window[1]}); Transformers would silently skip Hub kernels"
    )
    overlap = _overlap(window)
    if overlap is not None:
        return Finding(message, _pip(("kernels", overlap)))
    return Finding(
        f"{message}; this kernlock supports {_window('kernels', SUPPORTED_KERNELS)}, which "
        f"{_window('transformers', SUPPORTED_TRANSFORMERS)} accepts",
        _pip(("transformers", SUPPORTED_TRANSFORMERS)),
    )


def minver_findings(entries: Iterable[tuple[LockedKernel, LockedVariant]]) -> list[Finding]:
    """Locked variants that need a newer kernels than the installed one."""
    kernels = installed_version("kernels")
    installed = _parse(kernels) if kernels else None
    window = kernels_window()  # stay within what the installed Transformers accepts, too
    high = min((SUPPORTED_KERNELS[1], *([window[1]] if window else [])), key=_parse)
    findings = []
    for kernel, variant in entries:
        if variant.kernels_minver is None or installed is None:
            continue
        required = _parse(variant.kernels_minver)
        if required is None or installed >= required:
            continue
        message = (
            f"{kernel.spec} {variant.name} needs kernels>={variant.kernels_minver}, installed "
            f"kernels {kernels}"
        )
        if required < _parse(high):
            findings.append(Finding(message, _pip(("kernels", (variant.kernels_minver, high)))))
        else:  # beyond what this kernlock supports: an older build of the kernel is the way out
            findings.append(
                Finding(
                    f"{message}; this kernlock supports {_window('kernels', SUPPORTED_KERNELS)}",
                    f"lock a build of {kernel.repo} that accepts kernels {SUPPORTED_KERNELS[0]}: "
                    f"kernlock lock {kernel.repo}@<older revision>",
                )
            )
    return findings


def _dependency_imports(name: str, backend: str) -> list[tuple[str, str]] | None:
    """(pip package, import name) pairs kernels maps a `python-depends` entry to, from its data
    file."""
    spec = importlib.util.find_spec("kernels")
    if spec is None or not spec.submodule_search_locations:
        return None
    from kernlock._internal.compat.kernels_api import kernels_python_depends

    try:
        data = kernels_python_depends(Path(next(iter(spec.submodule_search_locations))))
    except (OSError, ValueError):
        return None
    info = data.get("general", {}).get(name) or data.get("backends", {}).get(backend, {}).get(name)
    if info is None:
        return None
    return [(p["pkg"], p["import"]) for p in info.get("python", []) if p.get("import")]


def python_depends_findings(
    entries: Iterable[tuple[LockedKernel, LockedVariant]], backend: str
) -> list[Finding]:
    """Locked variants whose Python dependencies are not importable here."""
    findings = []
    for kernel, variant in entries:
        for dependency in variant.python_depends:
            pairs = _dependency_imports(dependency, backend)
            if pairs is None:
                findings.append(
                    Finding(
                        f"{kernel.spec} {variant.name} depends on {dependency!r}, which the "
                        "installed kernels does not know",
                        "upgrade kernels, or pin a build of the kernel without that dependency",
                    )
                )
                continue
            for package, module in pairs:
                if importlib.util.find_spec(module) is None:
                    findings.append(
                        Finding(
                            f"{kernel.spec} {variant.name} needs Python package {package} (import "
                            f"{module}), which is not installed",
                            f"pip install {package}",
                        )
                    )
    return findings


def free_threaded_findings(entries: Iterable[tuple[LockedKernel, LockedVariant]]) -> list[Finding]:
    """Arch kernels on a free-threaded interpreter that cannot load them (Python < 3.15)."""
    if not (3, 13) <= sys.version_info < (3, 15):  # free-threaded builds exist from 3.13
        return []
    import sysconfig  # not at the top: it costs `apply()` a few milliseconds where it cannot matter

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        return []
    return [
        Finding(
            f"{kernel.spec} {variant.name} is an arch kernel; free-threaded Python "
            f"{sys.version.split()[0]} cannot load it",
            "use a regular (GIL) interpreter, or Python 3.15+",
        )
        for kernel, variant in entries
        if not variant.name.startswith("torch-")
    ]


def telemetry_finding() -> Finding | None:
    """The kernels 0.17 + huggingface_hub ≥ 2.4 failure when telemetry is disabled."""
    if os.environ.get("HF_HUB_DISABLE_TELEMETRY", "").lower() not in TRUE or os.environ.get(
        "HF_HUB_USER_AGENT_ORIGIN"
    ):
        return None
    kernels, hub = installed_version("kernels"), installed_version("huggingface_hub")
    if kernels is None or hub is None:
        return None
    if not (
        _parse(kernels)
        and _parse(kernels).release[:2] == (0, 17)
        and _parse(hub)
        and _parse(hub).release[:2] >= (2, 4)
    ):
        return None
    return Finding(
        f"HF_HUB_DISABLE_TELEMETRY=1 with kernels {kernels} and huggingface_hub {hub} makes every "
        "unlocked kernels request "
        'fail before it is sent (reported as "could not verify publisher trust status"); '
        "locked loads are not affected",
        "export HF_HUB_USER_AGENT_ORIGIN=kernlock (or unset HF_HUB_DISABLE_TELEMETRY)",
        blocking=False,
    )


def installed_stack_finding() -> Finding | None:
    """The installed kernels/Transformers pair cannot load kernels through kernlock (no lock needed
    to tell)."""
    return kernels_support_finding() or kernels_window_finding()


def require_compatible(lock: Lockfile, target: Target) -> list[Finding]:
    """Raise `CompatibilityError` when this machine cannot load `lock`'s variants for `target`; the
    warnings otherwise."""
    entries = [(k, v) for k in lock.kernels if (v := k.variant_for(target)) is not None]
    findings = diagnose(entries, backend_name(target.backend))
    blocking = next((finding for finding in findings if finding.blocking), None)
    if blocking is not None:
        raise CompatibilityError(blocking.message, fix=blocking.fix)
    return findings


def diagnose(entries: list[tuple[LockedKernel, LockedVariant]], backend: str) -> list[Finding]:
    """Every compatibility finding for the locked variants this machine would load."""
    findings = [f for f in (installed_stack_finding(), telemetry_finding()) if f is not None]
    findings += minver_findings(entries)
    findings += python_depends_findings(entries, backend)
    findings += free_threaded_findings(entries)
    return findings


def backend_name(backend: str) -> str:
    """kernels' backend family of a target backend string (`cu128` → `cuda`)."""
    for prefix, name in (("cu", "cuda"), ("rocm", "rocm"), ("xpu", "xpu"), ("cann", "cann")):
        if backend.startswith(prefix):
            return name
    return backend
