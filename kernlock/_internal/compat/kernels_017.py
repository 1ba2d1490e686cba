"""kernels 0.17: modules at `kernels.<name>`; no load-time validators.

Layer and function repositories look their version up through
`_versions.select_revision_or_version`, outside the resolver chain, so that
lookup is patched too. Revisions are plain strings.
"""

from __future__ import annotations

from typing import Any

FIRST = (0, 17)
ROOT = "kernels"  # the package kernels' modules live in
PYTHON_DEPENDS = "python_depends.json"  # relative to the kernels package
# no Python dimension: `_resolve_variant_for_system` takes no `python_version`/`free_threaded`, and
# new-style (`cpython-3.9-abi3`) variant names do not parse as arch builds
PYTHON_ABI = False
MACOS = True  # `_resolve_variant_for_system` takes `macos_version`
RESOLVER_CHAIN = True  # loads resolve through `deps.resolve_kernel_tree` and its resolvers
MODULES: dict[str, str] = {}  # kernels modules kept under another name than their own
JSON_LOCK = True  # kernels' own JSON lock is `KernelLocks`
REVISION_LOOKUP: tuple[str, str, tuple[str, ...]] | None = (
    "_versions",
    "select_revision_or_version",
    ("repo_id", "revision", "version", "local_files_only"),
)
VALIDATORS: str | None = None  # the module of load-time kernel validators
# in `verify`: kernels' default signers, a list of `GitHubWorkflowPolicy`
SIGNING_POLICY = "DEFAULT_POLICIES"


def parse_backend(parse: Any, name: str) -> Any:
    """kernels' `Backend` for a backend name (`cpu`, `cu128`)."""
    return parse(name)


def revision(commit: str) -> Any:
    """A commit as kernels' resolvers carry it."""
    return commit
