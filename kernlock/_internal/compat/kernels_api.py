"""The version-independent adapter over kernels' internals.

kernlock reuses kernels' variant ranking and backend detection, its resolver
protocol, its lock types and its `LOCAL_KERNELS` parser, and wraps its loaders
and load-time validators. Where kernels offers a public name (`Metadata`,
`VariantAccepted`, `get_kernel_variants`, …) kernlock uses it; the private rest
is reached here, behind kernlock's own small types (`Decision`, `Target`, plain
tuples). Where kernels lines differ (0.16 keeps its loaders in one module and has no
resolver chain; 0.19 moved every module under `kernels._internals`), the line's module
(`kernels_016`, `kernels_017`, `kernels_018`, `kernels_019`, chosen once by `line()`) says
how. Each name kernlock relies on is listed by `kernels_contract.internals()`:
`broken_internals()` (run by the contract tests against every supported kernels) names the one
that moved or changed shape.

Nothing here imports kernels or Torch at module import time.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from kernlock._internal.compat import kernels_016, kernels_017, kernels_018, kernels_019
from kernlock._internal.host import installed_version, interpreter, system_platform
from kernlock._internal.spec.target import Target

# ---------------------------------------------------------------- the kernels line

LINES: tuple[ModuleType, ...] = (kernels_016, kernels_017, kernels_018, kernels_019)


def line_for(version: str | None) -> ModuleType:
    """The line module for a kernels version; the newest line for a newer or unknown version."""
    if version is None:
        return LINES[-1]
    release = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    chosen = LINES[0]
    for candidate in LINES:
        if release >= candidate.FIRST:
            chosen = candidate
    return chosen


@functools.cache
def line() -> ModuleType:
    """The line module of the installed kernels (read from its metadata, without importing it)."""
    return line_for(installed_version("kernels"))


def module_name(name: str, kernels_line: ModuleType | None = None) -> str:
    """Where kernels module `name` (`variants`, `resolver`, …; `_rust` and the public `kernels`
    never moved) lives."""
    if name in ("kernels", "_rust"):
        return "kernels" if name == "kernels" else "kernels._rust"
    kernels_line = kernels_line or line()
    return f"{kernels_line.ROOT}.{kernels_line.MODULES.get(name, name)}"


def _module(name: str) -> ModuleType:
    return importlib.import_module(module_name(name))


def kernels_module(name: str) -> ModuleType:
    """kernels' module `name` (`layer.repos`, …) where the installed line keeps it; imports it."""
    return _module(name)


# ---------------------------------------------------------------- variants


class Decision(NamedTuple):
    """kernels' verdict on one build variant: accepted (ranked first to last) or rejected with a
    reason."""

    variant: str
    accepted: bool
    reason: str = ""


def preferred(decisions: list[Decision]) -> str | None:
    """The variant kernels loads, from its ranked verdicts (`target_decisions`, `system_decisions`):
    the first, when accepted; None when kernels loads none."""
    return decisions[0].variant if decisions and decisions[0].accepted else None


def _parsed(names: Iterable[str]) -> list[Any]:
    parse_variant = _module("variants").parse_variant
    parsed = []
    for name in names:
        try:
            parsed.append(parse_variant(name))
        except ValueError:
            continue  # kernels ignores variants it cannot parse
    return parsed


def _decisions(trace: list[Any]) -> list[Decision]:
    from kernels import VariantAccepted

    return [
        Decision(d.variant.variant_str, True)
        if isinstance(d, VariantAccepted)
        else Decision(d.variant.variant_str, False, d.reason)
        for d in trace
    ]


def metal_min_macos() -> str:
    """The oldest macOS kernels loads Metal builds on."""
    return str(_module("variants")._METAL_MIN_MACOS_VERSION)


def system_parameters(target: Target) -> dict[str, Any]:
    """`target` as the keyword arguments of kernels' `_resolve_variant_for_system`.

    A Darwin target without a macOS version stands for a macOS new enough for
    kernels' Metal builds; a target without a tvm-ffi version has no tvm-ffi; a
    target without a Python version stands for this interpreter (`host.interpreter`).
    The Python version and free-threading are passed only to a kernels line that
    takes them (0.19+, `PYTHON_ABI`): 0.17 and 0.18 have no Python dimension; the macOS
    version only to one with a macOS dimension (0.17+, `MACOS`).
    """
    from packaging.version import Version

    extra: dict[str, Any] = {}
    if line().MACOS:
        macos = target.macos or (metal_min_macos() if target.os == "darwin" else None)
        extra["macos_version"] = Version(macos) if macos else None
    if line().PYTHON_ABI:
        version, free_threaded = interpreter(target)
        extra |= {"python_version": Version(version), "free_threaded": free_threaded}
    return {
        "selected_backend": line().parse_backend(_module("backends").parse_backend, target.backend),
        "cpu": target.cpu,
        "os": target.os,
        "torch_version": Version(target.torch_version),
        "torch_cxx11_abi": target.cxx11_abi,
        "tvm_ffi_version": Version(target.tvm_ffi) if target.tvm_ffi else None,
        **extra,
    }


def target_decisions(variant_names: Iterable[str], target: Target) -> list[Decision]:
    """kernels' ranked verdicts over `variant_names` for `target`: accepted first, best first.

    Remembered per set of names and target (for the kernels module in use): a lock asks the same
    question for every kernel built with the same variants, and for each Python of a target
    (`python_choices`)."""
    return list(_target_decisions(tuple(variant_names), target, _module("variants")))


def warm_variant_ranking() -> None:
    """Import kernels' variant ranking now (in a thread of its own: the import takes a third of a
    second); a failure is left for `target_decisions` to report."""
    with contextlib.suppress(Exception):
        _module("variants")


@functools.lru_cache(maxsize=4096)
def _target_decisions(
    variant_names: tuple[str, ...], target: Target, variants: ModuleType
) -> tuple[Decision, ...]:
    _, trace = variants._resolve_variant_for_system(
        variants=_parsed(variant_names), **system_parameters(target)
    )
    return tuple(_decisions(trace))


def system_decisions(variant_names: Iterable[str], backend: str | None = None) -> list[Decision]:
    """kernels' ranked verdicts over `variant_names` for this machine (imports Torch)."""
    _, trace = _module("variants").resolve_variants(_parsed(variant_names), backend)
    return _decisions(trace)


def system_variant_trace(variant_names: Iterable[str], backend: str | None) -> list[Any]:
    """kernels' own decision objects for this machine (what `kernels.get_kernel_variants`
    returns)."""
    return _module("variants").resolve_variants(_parsed(variant_names), backend)[1]


def running_backend() -> str:
    """The backend kernels selects on this machine (`cpu`, `cu128`, …; imports Torch)."""
    return _module("backends")._select_backend(None).variant_str


def kernels_target() -> Target:
    """The running environment exactly as kernels detects it (imports Torch)."""
    import re

    import torch

    cpu, os_name = system_platform()
    version = re.match(r"(\d+)\.(\d+)", torch.__version__)
    assert version is not None
    cxx11 = bool(torch.compiled_with_cxx11_abi()) if os_name == "linux" else None
    return Target(
        torch=(int(version.group(1)), int(version.group(2))),
        backend=running_backend(),
        cpu=cpu,
        os=os_name,
        cxx11_abi=cxx11,
    )


# ---------------------------------------------------------------- kernels' metadata, resolvers and
# loads


def variant_metadata(data: bytes) -> Any:
    """kernels' parsed `metadata.json` of a build variant."""
    from kernels import Metadata

    return Metadata.from_bytes(data)


def default_signers() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """kernels' curated signers, from its default signature policy: (GitHub repository, allowed
    build-signer URIs).

    The line names the policy (0.17: `verify.DEFAULT_POLICIES`, a list; 0.18+:
    `verify.DEFAULT_POLICY`, sigstore's `AnyOf`); each child is a `GitHubWorkflowPolicy` with
    `repo_id` and `signer_uris`. Imports sigstore (through kernels): call it only to verify.
    """
    policy = getattr(_module("verify"), line().SIGNING_POLICY)
    # sigstore's AnyOf keeps its policies in _children
    children = getattr(policy, "_children", policy)
    return tuple((child.repo_id, tuple(child.signer_uris)) for child in children)


def metadata_digest(metadata: Any) -> tuple[str, dict[str, str]] | None:
    """A parsed `metadata.json`'s digest: `(algorithm, {relative path: base64 hash})`, or None
    without one."""
    digest = metadata.digest
    if digest is None:
        return None
    algorithm = str(digest.algorithm).rsplit(".", 1)[-1].lower()
    return algorithm, dict(digest.files)


def metadata_archs(metadata: Any) -> tuple[str, ...]:
    """The GPU architectures a parsed `metadata.json` lists (`backend.archs`: `8.0`, `9.0a`,
    `10.0f+PTX`, `gfx942`)."""
    return tuple(metadata.backend.archs or ())


# ---------------------------------------------------------------- GPU architectures (kernels'
# ArchValidator)


def gpu_family(backend: str) -> str | None:
    """`cuda` or `rocm` for a target backend whose builds kernels checks against the device's
    architecture, else None."""
    if backend.startswith("cu") and backend[2:].isdigit():
        return "cuda"
    return "rocm" if backend.startswith("rocm") else None


def arch_covers(archs: Iterable[str], family: str, device: str) -> bool:
    """Whether a build listing `archs` loads on a `family` device of architecture `device`, as
    kernels' `ArchValidator` decides (`archs._check_arch_incompatibility`).

    CUDA: `device` is a compute capability (`9.0`), matched by kernels' own
    `_supports_cuda_capability` (suffixes `a`/`f`, `+PTX`; a list in no known format covers
    everything). ROCm: `device` is a `gfx` name, which must be listed (kernels compares it inline).
    A build without archs is not checked by kernels, so it covers every device. Pure: imports
    kernels' `archs` module (no Torch, no device).
    """
    archs = list(archs)
    if not archs:
        return True
    if family == "rocm":
        return device in archs
    major, _, minor = device.partition(".")
    return bool(_module("archs")._supports_cuda_capability(archs, (int(major), int(minor or 0))))


def device_arch(family: str) -> str | None:
    """This machine's GPU architecture as kernels' `ArchValidator` reads it (`9.0`, `gfx942`), or
    None where kernels does not check (no such GPU, or a Torch built for another backend). Imports
    Torch and initialises the device."""
    import torch

    if family == "cuda":
        if torch.version.cuda is None or not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability()
        return f"{major}.{minor}"
    if family == "rocm":
        if torch.version.hip is None or not torch.cuda.is_available():
            return None
        return str(torch.cuda.get_device_properties(torch.cuda.current_device()).gcnArchName).split(
            ":"
        )[0]
    return None


def kernel_metadata(kernel: Any) -> Any:
    """The parsed `metadata.json` of a kernels kernel location (`LocalKernel`)."""
    return kernel.metadata


def kernel_request(kernel: Any) -> tuple[str, int | None, str | None]:
    """`(repo, version, revision)` of the `KernelDependency` kernels asks a resolver for."""
    return (
        kernel.repo_id,
        getattr(kernel.version, "version", None),
        getattr(kernel.version, "revision", None),
    )


class VariantDirectory(NamedTuple):
    """A build variant's directory and parsed `metadata.json`: what kernels 0.16, which has no
    `LocalKernel`, imports a kernel from."""

    variant_path: Path
    metadata: Any


def locked_kernel(root: Path, repo: str, commit: str, variant: str) -> Any:
    """kernels' `LocalKernel` for a verified variant directory, remembering its Hub origin
    (kernels 0.16: a `VariantDirectory`)."""
    from kernels import Metadata

    metadata = Metadata.read_from_file(root / "metadata.json")
    if not line().RESOLVER_CHAIN:
        return VariantDirectory(root, metadata)
    resolver = _module("resolver")
    origin = resolver.RemoteKernel(
        repo_id=repo,
        revision=line().revision(commit),
        metadata=metadata,
        variant=_module("variants").parse_variant(variant),
    )
    return resolver.LocalKernel(variant_path=root, metadata=metadata, origin=origin)


def local_path_kernel(path: Path, backend: str | None) -> Any:
    """kernels' `LocalKernel` for a local kernel directory (what `LOCAL_KERNELS` points at;
    kernels 0.16: the `VariantDirectory` its `get_local_kernel` would import)."""
    if not line().RESOLVER_CHAIN:
        from kernels import Metadata

        variants = _module("variants")
        root = path
        for base in (path, path / "build"):
            chosen, _ = variants.resolve_variant(variants.get_variants_local(base), backend)
            if chosen is not None:
                root = base / chosen.variant_str
                break
        return VariantDirectory(root, Metadata.read_from_file(root / "metadata.json"))
    return _module("resolver").resolve_local_kernel(path, backend=backend)


def local_kernel_overrides(value: str | None) -> dict[str, Path]:
    """`LOCAL_KERNELS` (`repo=path:repo=path`) as kernels reads it; a bad value raises `ValueError`.

    Mirrors `kernels.load._parse_local_kernel_overrides` without importing kernels
    (so `kernlock verify` stays cheap); a contract test keeps the two in step.
    """
    overrides = {}
    for entry in (value or "").split(":") if value else []:
        if "=" not in entry:
            raise ValueError(
                f"Invalid LOCAL_KERNELS entry: {entry}. Expected format: "
                "repo_id_1=path_1:repo_id_2=path_2"
            )
        repo, path = entry.split("=", 1)
        overrides[repo] = Path(path)
    return overrides


def locked_dependency(repo: str, commit: str) -> tuple[Any, Any]:
    """What kernels' lock readers return: `(KernelLocks, KernelDependency)` pinning `repo` to
    `commit`."""
    from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

    dependency = KernelDependency(repo_id=repo, version=KernelVersion.Revision(commit))
    return KernelLocks(locks={dependency: KernelLock(commit=commit)}), dependency


def locks_commit(locks: Any, dependency: Any) -> str | None:
    """The commit a kernels `KernelLocks` records for `dependency`."""
    lock = locks.get(dependency, None)
    return str(lock.commit) if lock is not None else None


# ---------------------------------------------------------------- kernels' data files


def kernels_python_depends(kernels_root: Path) -> dict:
    """kernels' data file mapping `python-depends` names to pip packages and import names."""
    import json

    return json.loads((kernels_root / line().PYTHON_DEPENDS).read_text())
