"""kernels 0.18: modules at `kernels.<name>`, load-time validators, `Oid` revisions.

Every load (layer and function repositories included) goes through the resolver
chain, so no version lookup needs patching. `validate` checks each loaded variant
(`DigestValidator`: files against the metadata digest, with receipts in the
kernels cache; `SignatureValidator`: Sigstore, online). Revisions are `Oid`s.
"""

from __future__ import annotations

from typing import Any

FIRST = (0, 18)
ROOT = "kernels"
PYTHON_DEPENDS = "python_depends.json"
# no Python dimension: `_resolve_variant_for_system` takes no `python_version`/`free_threaded`, and
# new-style (`cpython-3.9-abi3`) variant names do not parse as arch builds
PYTHON_ABI = False
MACOS = True  # `_resolve_variant_for_system` takes `macos_version`
RESOLVER_CHAIN = True  # loads resolve through `deps.resolve_kernel_tree` and its resolvers
MODULES: dict[str, str] = {}  # kernels modules kept under another name than their own
JSON_LOCK = True  # kernels' own JSON lock is `KernelLocks`
REVISION_LOOKUP: tuple[str, str, tuple[str, ...]] | None = None
VALIDATORS: str | None = "validate"
# in `verify`: kernels' default signers, sigstore's `AnyOf` over `GitHubWorkflowPolicy`s
SIGNING_POLICY = "DEFAULT_POLICY"


def parse_backend(parse: Any, name: str) -> Any:
    """kernels' `Backend` for a backend name (`cpu`, `cu128`)."""
    return parse(name)


def revision(commit: str) -> Any:
    """A commit as kernels' resolvers carry it: an `Oid`."""
    from kernels._rust import Oid

    return Oid.from_str(commit)
