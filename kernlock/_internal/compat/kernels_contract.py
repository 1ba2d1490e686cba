"""The contract with kernels: each internal name kernlock relies on, per kernels line, and the check
that it still exists with the shape kernlock expects.

`internals()` lists them; `broken_internals()` (run by the contract tests against every supported
kernels) names the one that moved or changed shape. The adapter itself is
`kernlock._internal.compat.kernels_api`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, NamedTuple

from kernlock._internal.compat.kernels_api import line, module_name


class Internal(NamedTuple):
    """A kernels name kernlock relies on: where it lives and what it must accept."""

    module: str
    name: str
    parameters: tuple[str, ...] = ()  # keyword parameters a callable must accept
    attributes: tuple[str, ...] = ()  # attributes a class or value must have

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.name}"


# By kernels module, as `module_name` places it; `kernels` is the public API.
_CONTRACT: tuple[Internal, ...] = (
    Internal(
        "kernels",
        "Metadata",
        attributes=("read_from_file", "from_bytes", "kernel_depends", "digest"),
    ),
    Internal("kernels", "VariantAccepted", attributes=("variant",)),
    Internal("kernels", "VariantRejected", attributes=("variant", "reason")),
    Internal("kernels", "get_kernel_variants", ("repo_id", "revision", "version", "backend")),
    Internal("variants", "parse_variant"),
    Internal("archs", "_supports_cuda_capability", ("archs", "capability")),  # read by arch_covers
    Internal(
        "archs", "_check_arch_incompatibility", ("metadata", "variant")
    ),  # ArchValidator: what arch_covers mirrors
    Internal("variants", "resolve_variants", ("variants", "backend")),
    Internal(
        "variants",
        "_resolve_variant_for_system",
        (
            "variants",
            "selected_backend",
            "cpu",
            "os",
            "torch_version",
            "torch_cxx11_abi",
            "tvm_ffi_version",
            "macos_version",
        ),
    ),
    Internal("variants", "_METAL_MIN_MACOS_VERSION"),
    Internal("variants", "get_kernel_variants", ("repo_id", "revision", "version", "backend")),
    Internal("backends", "parse_backend"),
    Internal("backends", "_select_backend"),
    Internal("_rust", "KernelDependency", attributes=("repo_id", "version")),
    Internal("_rust", "KernelVersion", attributes=("Version", "Revision")),
    Internal("_rust", "KernelLock", attributes=("commit",)),
    Internal("_rust", "KernelLocks", attributes=("from_json", "to_json", "keys")),
    Internal("resolver", "LocalKernel", ("variant_path", "metadata", "origin")),
    Internal("resolver", "RemoteKernel", ("repo_id", "revision", "metadata", "variant")),
    Internal("resolver", "resolve_local_kernel", ("repo_path", "backend")),
    Internal("resolver", "SequentialResolver", attributes=("resolvers",)),
    Internal("resolver", "RepoPathsResolver", attributes=("local_kernels",)),
    Internal("importer", "_import_from_path", ("variant_path", "deps", "repo_info")),
    Internal("deps", "resolve_kernel_tree", ("api", "kernel", "backend", "resolver")),
    Internal(
        "load", "_parse_local_kernel_overrides", ("local_kernels",)
    ),  # mirrored by local_kernel_overrides
    Internal("locking", "get_locked_kernel_revision", ("repo_id", "lockfile")),
    Internal("locking", "get_caller_locked_kernel_revision", ("repo_id",)),
    Internal(
        "validate", "ArchValidator", attributes=("validate_metadata",)
    ),  # wrapped by _patch_validators
)


# kernels 0.16: one loader module (`utils`), no resolver chain, no Rust lock types, no validators
_CONTRACT_016: tuple[Internal, ...] = (
    Internal("kernels", "Metadata", attributes=("read_from_file", "from_bytes", "digest")),
    Internal("kernels", "VariantAccepted", attributes=("variant",)),
    Internal("kernels", "VariantRejected", attributes=("variant", "reason")),
    Internal("kernels", "get_kernel_variants", ("repo_id", "revision", "version", "backend")),
    Internal("variants", "parse_variant"),
    Internal("variants", "resolve_variants", ("variants", "backend")),
    Internal("variants", "resolve_variant", ("variants", "backend")),
    Internal("variants", "get_variants_local", ("repo_path",)),
    Internal(
        "variants",
        "_resolve_variant_for_system",
        (
            "variants",
            "selected_backend",
            "cpu",
            "os",
            "torch_version",
            "torch_cxx11_abi",
            "tvm_ffi_version",
        ),
    ),
    Internal("archs", "_supports_cuda_capability", ("archs", "capability")),
    Internal("archs", "_check_arch_incompatibility", ("metadata", "variant")),
    Internal("backends", "parse_backend"),
    Internal("backends", "_select_backend"),
    Internal(
        "utils",
        "install_kernel",
        ("repo_id", "revision", "local_files_only", "backend", "user_agent"),
    ),
    Internal("utils", "_resolve_local_variant_path", ("api", "repo_id", "revision", "backend")),
    Internal("utils", "_check_trust_remote_code", ("repo_id", "trust_remote_code")),
    Internal("utils", "has_kernel", ("repo_id", "revision", "version", "backend", "check_arch")),
    Internal("utils", "get_kernel_variants", ("repo_id", "revision", "version", "backend")),
    Internal("utils", "_import_from_path", ("variant_path", "repo_info")),
    Internal("utils", "_loaded_kernels"),
    Internal("utils", "_get_locked_kernel", ("repo_id", "lock_json")),
    Internal("utils", "_get_caller_locked_kernel", ("repo_id",)),
    Internal("utils", "_parse_local_kernel_overrides", ("local_kernels",)),
)


def internals(kernels_line: ModuleType | None = None) -> tuple[Internal, ...]:
    """Every kernels name kernlock relies on with `kernels_line` (default: the installed one), by
    full module path."""
    kernels_line = kernels_line or line()
    contract = list(_CONTRACT if kernels_line.RESOLVER_CHAIN else _CONTRACT_016)
    if kernels_line.REVISION_LOOKUP is not None:
        module, name, parameters = kernels_line.REVISION_LOOKUP
        contract.append(Internal(module, name, parameters))
    if kernels_line.VALIDATORS is not None:
        contract += [
            Internal(kernels_line.VALIDATORS, name, attributes=("validate_kernel",))
            for name in ("DigestValidator", "SignatureValidator")
        ]
    if kernels_line.PYTHON_ABI:  # 0.19+: targets pass their Python version and free-threading too
        contract = [
            c._replace(parameters=(*c.parameters, "python_version", "free_threaded"))
            if c.name == "_resolve_variant_for_system"
            else c
            for c in contract
        ]
    contract.append(Internal("verify", kernels_line.SIGNING_POLICY))  # read by default_signers
    return tuple(
        internal._replace(module=module_name(internal.module, kernels_line))
        for internal in contract
    )


def _resolve(internal: Internal) -> Any:
    return getattr(importlib.import_module(internal.module), internal.name)


def _accepted_parameters(value: Any) -> set[str] | None:
    import inspect

    target = value.__init__ if inspect.isclass(value) else value
    try:
        return set(inspect.signature(target).parameters)
    except (TypeError, ValueError):  # compiled (Rust) callables have no signature
        return None


def check_internal(internal: Internal) -> str | None:
    """What changed about one internal (`kernels.x.name: ...`), or None when it still holds."""
    try:
        value = _resolve(internal)
    except (ImportError, AttributeError) as error:
        return f"{internal.dotted}: missing ({error})"
    accepted = _accepted_parameters(value) if internal.parameters else None
    if accepted is not None:
        lacking = [p for p in internal.parameters if p not in accepted]
        if lacking:
            return f"{internal.dotted}: no longer accepts {', '.join(lacking)}"
    fields = getattr(value, "__dataclass_fields__", {})
    lacking = [a for a in internal.attributes if not hasattr(value, a) and a not in fields]
    if lacking:
        return f"{internal.dotted}: has no {', '.join(lacking)}"
    return None


def broken_internals(kernels_line: ModuleType | None = None) -> list[str]:
    """One line per kernels name that is missing or changed shape; empty when all hold."""
    return [
        problem
        for internal in internals(kernels_line)
        if (problem := check_internal(internal)) is not None
    ]
