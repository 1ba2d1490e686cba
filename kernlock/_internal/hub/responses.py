"""What the Hub reports: a ref, a file of a repo tree, a file's download metadata, and the git
blob id that names a small file."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Ref:
    """A branch or tag and the commit it points at."""

    name: str
    kind: str  # "branch" or "tag"
    commit: str


@dataclass(frozen=True)
class TreeFile:
    """A file in a repo tree: path, size, git blob id and LFS sha256 when the Hub stores it in
    LFS."""

    path: str
    size: int
    blob_id: str
    lfs_sha256: str | None


@dataclass(frozen=True)
class RemoteFile:
    """What the Hub says of a file: the ETag huggingface_hub names its blob by (sha256 for LFS
    files, else the git blob id), the size and where the bytes are (the CDN for LFS files)."""

    url: str
    etag: str
    size: int | None
    location: str


def git_blob_id(data: bytes) -> str:
    """The git blob SHA-1 of `data` (what the Hub reports as `oid` for non-LFS files)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()
