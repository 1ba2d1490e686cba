"""kernels 0.16: one loader module (`kernels.utils`), no resolver chain, no load-time validators.

Every load (`get_kernel`, `has_kernel`, `get_locked_kernel`, `load_kernel`, layer and
function repositories, which call `get_kernel` with the commit they looked up) goes
through `utils`: `_versions.select_revision_or_version` turns a version into a commit,
`install_kernel` downloads the variant kernels ranks first and returns its directory,
`archs._check_arch_incompatibility` checks it against the device, and `_import_from_path`
imports it. `_check_trust_remote_code` asks the Hub whether the publisher is trusted on
every load. kernels 0.16 has no Rust lock types: its own JSON lock is a list of
`{repo_id, sha, variants}` that kernlock neither migrates nor exports (`JSON_LOCK`), and no
macOS dimension in its variant ranking. `get_local_kernel(path)` names no repository, so
kernlock cannot tell it stands in for a locked repo (`LOCAL_KERNELS` is still checked by
`apply()`).
"""

from __future__ import annotations

from typing import Any

FIRST = (0, 16)
ROOT = "kernels"
PYTHON_DEPENDS = "python_depends.json"
PYTHON_ABI = False
# `_resolve_variant_for_system` takes no `macos_version`, and there is no `_METAL_MIN_MACOS_VERSION`
MACOS = False
# one loader module: 0.17+ split it into `importer`, `load`, `locking` and the resolver chain
RESOLVER_CHAIN = False
MODULES: dict[str, str] = {"importer": "utils", "load": "utils", "locking": "utils"}
JSON_LOCK = False  # kernels' own JSON lock is 0.17's `KernelLocks` format from 0.17 on
REVISION_LOOKUP: tuple[str, str, tuple[str, ...]] | None = (
    "_versions",
    "select_revision_or_version",
    ("repo_id", "revision", "version"),
)
VALIDATORS: str | None = None
SIGNING_POLICY = "DEFAULT_POLICIES"


def parse_backend(parse: Any, name: str) -> Any:
    """kernels' `Backend` for a backend name (`cpu`, `cu128`)."""
    return parse(name)


def revision(commit: str) -> Any:
    """A commit as kernels 0.16 carries it: a plain string."""
    return commit
