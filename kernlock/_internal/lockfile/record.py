"""A run's record: what a process loaded under the lock, as kept next to a checkpoint
(`kernlock.json`).

    {"format": 1, "lockfile": "...", "lock-sha256": "...", "target":
    "torch2.11-cxx11-cu130-x86_64-linux",
     "kernels": [{"repo": "...", "spec": "...", "commit": "...", "variant": "...", "content":
     "sha256:...", "files": {"__init__.py": "<sha256>", ...}}]}

`content` hashes what the lock says the variant is (its files' paths and sha256, sorted),
so two builds with the same files agree and no file is read to compute it; `files` keeps
each file's sha256, so `verify --against` names the file that changed.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kernlock._internal.lockfile.model import LockedKernel, LockedVariant

RECORD_FILENAME = "kernlock.json"
RECORD_FORMAT = 1


def variant_content(variant: LockedVariant) -> str:
    """`sha256:<hex>` over the variant's `path sha256` lines, sorted: its content as the lock pins
    it."""
    lines = "".join(f"{f.path}\0{f.sha256}\n" for f in sorted(variant.files, key=lambda f: f.path))
    return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()


def loaded_entry(entry: LockedKernel, variant: LockedVariant) -> dict[str, Any]:
    """One loaded kernel as the record keeps it."""
    return {
        "repo": entry.repo,
        "spec": entry.spec,
        "commit": entry.commit,
        "variant": variant.name,
        "content": variant_content(variant),
        "files": {f.path: f.sha256 for f in sorted(variant.files, key=lambda f: f.path)},
    }
