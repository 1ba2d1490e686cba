"""Kernel spec strings: the one parser for every place a kernel is named.

Grammar (what Transformers' `attn_implementation` and kernels accept)::

    spec     := [ "paged|" ] ( alias | repo [ "@" revision ] [ ":" func ] )
    alias    := "flash_attention_2" | "flash_attention_3" | "flash_attention_4"
    repo     := org "/" name
    revision := branch | tag | full or short commit SHA

Integer versions, as in kernels' `[tool.kernels.dependencies]` (`"org/repo" = 2`),
become `version=2`, the same pin as `org/repo@v2`.

The function suffix and the `paged|` prefix select how Transformers uses the
kernel; they are not part of the lock identity (`KernelSpec.key`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from kernlock.errors import SpecError

FLASH_ATTENTION_ALIASES = ("flash_attention_2", "flash_attention_3", "flash_attention_4")

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_REPO_RE = re.compile(rf"(?P<org>{_NAME})/(?P<name>{_NAME})")
_REVISION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_FUNC_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VERSION_BRANCH_RE = re.compile(r"v(\d+)")
_HEX_RE = re.compile(r"[0-9a-f]{4,40}")
# the origin of a spec `kernlock lock --record` saw loaded ([tool.kernlock] recorded)
RECORDED = "recorded"


@dataclass(frozen=True)
class Origin:
    """Where a spec was written: a file and line, or a description such as 'command line'."""

    where: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.where}:{self.line}" if self.line is not None else self.where


@dataclass(frozen=True)
class KernelSpec:
    """A parsed kernel spec.

    `repo` is empty for an unexpanded flash-attention alias (see `alias`).
    At most one of `version` and `revision` is set; neither means floating.
    """

    text: str
    repo: str = ""
    version: int | None = None
    revision: str | None = None
    func: str | None = None
    paged: bool = False
    alias: str | None = None
    origin: Origin | None = None
    # A spec found, not written: the device types Transformers loads it on (empty: every target) and
    # the model layers that bring it in. Such a spec is derived from a declared model, so it is not
    # one of the lock's inputs.
    devices: tuple[str, ...] = ()
    used_by: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The lock identity: `org/repo`, `org/repo@v2` or `org/repo@<rev>`."""
        if self.version is not None:
            return f"{self.repo}@v{self.version}"
        if self.revision is not None:
            return f"{self.repo}@{self.revision}"
        return self.repo

    @property
    def recorded(self) -> bool:
        """True for a spec a recorded run loaded (`kernlock lock --record`), not a file."""
        return self.origin is not None and self.origin.where == RECORDED

    @property
    def floating(self) -> bool:
        """True when the spec names no version or revision (Transformers picks the default)."""
        return self.version is None and self.revision is None

    def with_repo(self, repo: str) -> KernelSpec:
        """Return this spec with its alias expanded to `repo`."""
        return replace(self, repo=repo)


def _fail(text: str, problem: str, origin: Origin | None) -> SpecError:
    where = f" ({origin})" if origin else ""
    return SpecError(
        f"invalid kernel spec {text!r}{where}: {problem}",
        fix="write it as org/repo, org/repo@<branch|tag|sha>, org/repo:func or flash_attention_2",
    )


def parse_spec(text: str, origin: Origin | None = None) -> KernelSpec:
    """Parse a spec string; raise `SpecError` naming the spec and its origin."""
    if not isinstance(text, str) or not text.strip():
        raise _fail(str(text), "empty spec", origin)
    if text != text.strip() or any(c.isspace() for c in text):
        raise _fail(text, "spaces are not allowed", origin)
    body = text
    paged = False
    if "|" in body:
        prefix, _, body = body.partition("|")
        if prefix != "paged":
            raise _fail(
                text, f"unknown prefix {prefix + '|'!r} (only 'paged|' is accepted)", origin
            )
        paged = True
    if body in FLASH_ATTENTION_ALIASES:
        return KernelSpec(text=text, paged=paged, alias=body, origin=origin)
    if ".." in body or "\\" in body or body.startswith("/"):
        raise _fail(text, "path components such as '..', '/' or '\\' are not allowed", origin)
    func = None
    if ":" in body:
        body, _, func = body.partition(":")
        if not _FUNC_RE.fullmatch(func):
            raise _fail(text, f"function name {func!r} is not a Python identifier", origin)
    revision = None
    if "@" in body:
        body, _, revision = body.partition("@")
        if not revision:
            raise _fail(text, "nothing after '@'", origin)
        if "@" in revision:
            raise _fail(text, "more than one '@'", origin)
        if not _REVISION_RE.fullmatch(revision):
            raise _fail(
                text, f"revision {revision!r} has characters a Hub revision cannot have", origin
            )
    match = _REPO_RE.fullmatch(body)
    if not match or "--" in body:
        raise _fail(text, f"{body!r} is not an org/repo id", origin)
    return KernelSpec(
        text=text, repo=body, revision=revision, func=func, paged=paged, origin=origin
    )


def spec_from_version(repo: str, version: object, origin: Origin | None = None) -> KernelSpec:
    """A spec from kernels' `[tool.kernels.dependencies]` form: `"org/repo" = 2`."""
    base = parse_spec(repo, origin)
    if base.revision is not None or base.func is not None or base.alias is not None or base.paged:
        raise _fail(repo, "a dependency key must be a plain org/repo", origin)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise _fail(f"{repo} = {version!r}", "the version must be a non-negative integer", origin)
    return KernelSpec(text=f"{repo}@v{version}", repo=base.repo, version=version, origin=origin)


def version_of_branch(ref: str) -> int | None:
    """The kernel version a branch name stands for (`v2` → 2), else None."""
    match = _VERSION_BRANCH_RE.fullmatch(ref)
    return int(match.group(1)) if match else None


def looks_like_sha(revision: str) -> bool:
    """True for lower-case hex strings of 4 to 40 characters (a full or short commit SHA)."""
    return bool(_HEX_RE.fullmatch(revision))
