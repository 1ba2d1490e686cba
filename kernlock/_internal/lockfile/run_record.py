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
import json
from pathlib import Path
from typing import Any

from kernlock._internal.fs.bounded_read import read_bounded
from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant

RECORD_FILENAME = "kernlock.json"
RECORD_FORMAT = 1
RECORD_LIMIT = 16 << 20  # one run's record: a few kB per loaded kernel and layer
_KERNEL_KEYS = ("repo", "commit", "variant")  # strings every recorded kernel has


class UnreadableRecord(ValueError):
    """A `kernlock.json` that is not a run record kernlock wrote: not JSON, too deep, or wrong
    types."""


def read_record(path: Path) -> dict[str, Any]:
    """The run record at `path` (a checkpoint directory or its `kernlock.json`): a regular file
    under `RECORD_LIMIT`, with a string `target` and `kernels` of string fields. `UnreadableFile`
    (an `OSError`) or `UnreadableRecord` naming what is wrong, never a traceback."""
    file = path / RECORD_FILENAME if path.is_dir() else path
    try:
        record = json.loads(read_bounded(file, RECORD_LIMIT))
    except RecursionError:
        raise UnreadableRecord("nested too deeply to be a run record") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableRecord(f"not JSON ({error})") from None
    if not isinstance(record, dict) or not isinstance(record.get("target"), str):
        raise UnreadableRecord("not a kernlock run record (no string `target`)")
    kernels = record.get("kernels")
    if not isinstance(kernels, list):
        raise UnreadableRecord("not a kernlock run record (no `kernels` list)")
    for index, kernel in enumerate(kernels):
        if not isinstance(kernel, dict) or not all(
            isinstance(kernel.get(key), str) for key in _KERNEL_KEYS
        ):
            raise UnreadableRecord(
                f"kernels[{index}] is not a recorded kernel (strings {', '.join(_KERNEL_KEYS)})"
            )
        if any(not isinstance(kernel.get(key, ""), str) for key in ("spec", "content")):
            raise UnreadableRecord(f"kernels[{index}]: `spec` and `content` must be strings")
    return record


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
