"""The identifier rules every layer shares: commit SHAs, file hashes, build variant names, relative
file paths. Pure; imports nothing.

One place so the lock never accepts a name the resolver refuses (they had drifted apart).
"""

from __future__ import annotations

import re

_GIT_SHA_RE = re.compile(r"[0-9a-f]{40}")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
# never `.`, `..` or an option-like `-x`
_VARIANT_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def is_git_sha(text: str) -> bool:
    """A full 40-character lower-case hex git object id (a commit, a blob)."""
    return bool(_GIT_SHA_RE.fullmatch(text))


def is_sha256(text: str) -> bool:
    """A 64-character lower-case hex SHA-256."""
    return bool(_SHA256_RE.fullmatch(text))


def is_safe_relpath(path: str) -> bool:
    """A relative file path kernlock accepts (in the lock, from the Hub's listing): `/`-separated,
    not empty, no empty, `..` or absolute part (`a//b`, `a/`, `/a`, `../a` are refused), no
    backslash, no NUL."""
    parts = path.split("/")
    return (
        bool(path)
        and "\x00" not in path
        and "\\" not in path
        and ".." not in parts
        and "" not in parts
    )


def is_variant_name(text: str) -> bool:
    """A build variant directory name kernlock accepts (`build/<name>/` on the Hub,
    `[[kernel.variant]] name`)."""
    return bool(_VARIANT_NAME_RE.fullmatch(text))


# The digest algorithms kernels' `Digest` has (`DigestAlgorithm`), each base64 of the file's hashlib
# digest: the ones a variant's metadata digest is checked with, and the only ones a lock may name.
DIGEST_ALGORITHMS = ("sha256", "sha512")
