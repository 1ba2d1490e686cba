"""kernels 0.19: every module moved under `kernels._internals`; backends parse from parts.

Otherwise as 0.18 (validators, `Oid` revisions). `parse_backend` takes the parts
of a variant string and a `legacy` flag (0.19 also reads the dotted variant
format, `torch-2.10-…-cuda-12.8-…`); kernlock's targets use the legacy names.
"""

from __future__ import annotations

from typing import Any

FIRST = (0, 19)
ROOT = "kernels._internals"
PYTHON_DEPENDS = "_internals/python_depends.json"
# `_resolve_variant_for_system` takes `python_version` and `free_threaded` (new-style
# `cpython-3.9-abi3` variants)
PYTHON_ABI = True
MACOS = True  # `_resolve_variant_for_system` takes `macos_version`
RESOLVER_CHAIN = True  # loads resolve through `deps.resolve_kernel_tree` and its resolvers
MODULES: dict[str, str] = {}  # kernels modules kept under another name than their own
JSON_LOCK = True  # kernels' own JSON lock is `KernelLocks`
REVISION_LOOKUP: tuple[str, str, tuple[str, ...]] | None = None
VALIDATORS: str | None = "validate"
# in `verify`: kernels' default signers, sigstore's `AnyOf` over `GitHubWorkflowPolicy`s
SIGNING_POLICY = "DEFAULT_POLICY"


def parse_backend(parse: Any, name: str) -> Any:
    """kernels' `Backend` for a legacy backend name (`cpu`, `cu128`)."""
    return parse([name], legacy=True)


def revision(commit: str) -> Any:
    """A commit as kernels' resolvers carry it: an `Oid`."""
    from kernels._rust import Oid

    return Oid.from_str(commit)
