"""Advisories: known-bad kernel builds, declared in a small TOML file a project (or an organisation)
points at.

    [[advisory]]
    id = "KC-2026-1085"                          # unique; OSV/RustSec `id`
    aliases = ["kernels-community#1085"]         # OSV `aliases`: the issue, a CVE, ...
    repo = "kernels-community/flash-attn2"       # the kernel repo (OSV `affected.package.name`)
    summary = "v3's CUDA 12.8 build fails in the GQA backward pass"   # one line (OSV `summary`)
    details = "..."                              # optional (OSV `details`)
    references = ["https://github.com/huggingface/kernels-community/issues/1085"]

    [advisory.affected]                          # every key given must match (none given: refused)
    branch = "v3"                                # commits in the history of this branch (an OSV GIT
    range) ... introduced = "<commit>"                      #   ... from this one (OSV `introduced`;
    default "0": all earlier) fixed = "<commit>"                           #   ... up to, not
    including, this one (OSV `fixed`) commits = ["<commit>", ...]                  # or exactly
    these commits (OSV `versions`) variants = ["*-cu128-*"]                     # build variant
    names, fnmatch patterns sha256 = ["<64 hex>"]                        # or a variant holding a
    file with one of these hashes

    [advisory.fix]                               # where to go instead (RustSec `[versions]
    patched`) version = 2                                  # or revision = "v2" (a branch or tag),
    or commit = "<sha>"

A build is (repo, ref, commit, variant, file hashes). Whether a commit is in a branch's
range needs the branch's history (`history`: its commits, newest first, from the Hub);
without it (`verify`, offline) the lock's `ref` stands for the branch, and a range
bounded by `introduced`/`fixed` is decided only at its bounds (else `None`: undecided).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kernlock._internal.spec.ids import is_sha256
from kernlock._internal.spec.printable import printable
from kernlock.errors import ConfigError

_KEYS = {"id", "aliases", "repo", "summary", "details", "references", "affected", "fix"}
FORMAT_FIX = "correct the advisory file (the format: docs/how-to/advisories.md)"
"""The fix of every malformed advisory; `kernlock._internal.project.advisory_sources` names the file
and the way out."""
_AFFECTED_KEYS = {"branch", "introduced", "fixed", "commits", "variants", "sha256"}
_FIX_KEYS = {"version", "revision", "commit"}
_HEX = set("0123456789abcdef")


@dataclass(frozen=True)
class Fix:
    """The advisory's way out: another version, branch or tag, or commit."""

    version: int | None = None
    revision: str | None = None
    commit: str | None = None

    @property
    def revision_text(self) -> str:
        """The fix as a spec revision: `v2`, a branch or tag, or a commit."""
        return f"v{self.version}" if self.version is not None else str(self.revision or self.commit)


@dataclass(frozen=True)
class Advisory:
    """One known-bad set of builds of a kernel repo, why, and the fix."""

    id: str
    repo: str
    summary: str
    source: str  # the file or URL it was read from
    aliases: tuple[str, ...] = ()
    details: str = ""
    references: tuple[str, ...] = ()
    branch: str | None = None
    introduced: str | None = None
    fixed: str | None = None
    commits: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    sha256: frozenset[str] = frozenset()
    fix: Fix | None = None

    @property
    def title(self) -> str:
        """`KC-2026-1085 (kernels-community#1085): summary`."""
        aliases = f" ({', '.join(self.aliases)})" if self.aliases else ""
        return f"{self.id}{aliases}: {self.summary}"

    def fix_text(self, repo: str | None = None) -> str:
        """The fix as a sentence's object: `kernels-community/flash-attn2@v2`, or `no fix
        published`."""
        return f"{repo or self.repo}@{self.fix.revision_text}" if self.fix else "no fix published"

    def matches_build(self, variant: str, sha256s: Iterable[str] = ()) -> bool:
        """Whether a variant (by name and file hashes) is among the affected ones, whatever its
        commit."""
        if self.variants and not any(
            fnmatch.fnmatchcase(variant, pattern) for pattern in self.variants
        ):
            return False
        return not self.sha256 or not self.sha256.isdisjoint(sha256s)

    def matches_commit(
        self, commit: str, ref: str | None, history: Sequence[str] | None = None
    ) -> bool | None:
        """Whether `commit` (reached through `ref`) is affected; None when that cannot be told
        without `history`."""
        if self.commits:
            return any(commit.startswith(c) for c in self.commits)
        if self.branch is None:
            return True
        if history is not None:
            if commit not in history:
                return False
            at = history.index(commit)
            if (
                self.introduced is not None
                and self.introduced in history
                and at > history.index(self.introduced)
            ):
                return False  # older than the first affected commit
            return not (
                self.fixed is not None and self.fixed in history and at <= history.index(self.fixed)
            )
        if commit == self.fixed:
            return False
        if commit == self.introduced:
            return True
        if ref != self.branch:
            return False
        return True if self.introduced is None and self.fixed is None else None

    def affects(
        self,
        repo: str,
        commit: str,
        ref: str | None,
        variant: str,
        sha256s: Iterable[str] = (),
        history: Sequence[str] | None = None,
    ) -> bool | None:
        """Whether the advisory covers this build (None: undecided without the branch's history)."""
        if repo != self.repo or not self.matches_build(variant, sha256s):
            return False
        return self.matches_commit(commit, ref, history)


def parse_advisories(data: Any, source: str) -> tuple[Advisory, ...]:
    """The `[[advisory]]` tables of one advisory file (parsed TOML), validated; `ConfigError` names
    the bad key."""
    if not isinstance(data, dict) or set(data) - {"advisory"}:
        raise ConfigError(
            f"{source}: an advisory file holds only [[advisory]] tables", fix=FORMAT_FIX
        )
    entries = data.get("advisory", [])
    if not isinstance(entries, list):
        raise ConfigError(
            f"{source}: advisory must be an array of tables ([[advisory]])", fix=FORMAT_FIX
        )
    advisories = [
        _advisory(entry, f"{source}: advisory[{index}]", source)
        for index, entry in enumerate(entries)
    ]
    ids = [a.id for a in advisories]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate is not None:
        raise ConfigError(
            f"{source}: advisory id {duplicate!r} appears twice; give each advisory its own id",
            fix=FORMAT_FIX,
        )
    return tuple(advisories)


def _strings(entry: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}.{key} must be a list of strings", fix=FORMAT_FIX)
    return tuple(value)


def _text(entry: dict[str, Any], key: str, where: str, required: bool = False) -> str | None:
    value = entry.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: give {key} as a non-empty string", fix=FORMAT_FIX)
    return printable(value.strip())  # printed by verify and apply(): no forged lines


def _commit(value: str | None, key: str, where: str) -> str | None:
    if value is not None and not (7 <= len(value) <= 40 and set(value) <= _HEX):
        raise ConfigError(
            f"{where}.{key}: {value!r} is not a commit SHA (7 to 40 lower-case hex characters)",
            fix=FORMAT_FIX,
        )
    return value


def refuse_unknown_keys(table: dict[str, Any], known: set[str], where: str, fix: str) -> None:
    """`ConfigError` for the first key of `table` not in `known`, listing the known ones."""
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; known keys: {', '.join(sorted(known))}", fix=fix
        )


def _advisory(entry: Any, where: str, source: str) -> Advisory:
    from kernlock._internal.spec.kernel_spec import parse_spec

    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a table", fix=FORMAT_FIX)
    refuse_unknown_keys(entry, _KEYS, where, FORMAT_FIX)
    advisory_id, repo = _text(entry, "id", where, True), _text(entry, "repo", where, True)
    summary = _text(entry, "summary", where, True)
    assert advisory_id is not None and repo is not None and summary is not None
    if parse_spec(repo).text != repo or "/" not in repo:
        raise ConfigError(
            f"{where}: repo = {repo!r} must be a kernel repo (org/repo), not a spec", fix=FORMAT_FIX
        )
    where = f"{where} ({advisory_id})"
    affected = entry.get("affected")
    if not isinstance(affected, dict) or not affected:
        raise ConfigError(
            f"{where}: say which builds it affects in [advisory.affected] (branch, commits, "
            "variants or sha256)",
            fix=FORMAT_FIX,
        )
    refuse_unknown_keys(affected, _AFFECTED_KEYS, f"{where}.affected", FORMAT_FIX)
    branch = _text(affected, "branch", f"{where}.affected")
    commits = tuple(
        c
        for c in _strings(affected, "commits", f"{where}.affected")
        if _commit(c, "commits", where)
    )
    if branch and commits:
        raise ConfigError(
            f"{where}.affected: give a branch (with introduced/fixed) or a list of commits, not "
            "both",
            fix=FORMAT_FIX,
        )
    bounds = {
        key: _commit(_text(affected, key, f"{where}.affected"), key, f"{where}.affected")
        for key in ("introduced", "fixed")
    }
    if any(bounds.values()) and not branch:
        raise ConfigError(
            f"{where}.affected: introduced and fixed bound a branch's history; name the branch",
            fix=FORMAT_FIX,
        )
    hashes = _strings(affected, "sha256", f"{where}.affected")
    if not all(is_sha256(h) for h in hashes):
        raise ConfigError(
            f"{where}.affected.sha256: expected 64 lower-case hex characters each", fix=FORMAT_FIX
        )
    fix = _fix(entry.get("fix"), where)
    return Advisory(
        id=advisory_id,
        repo=repo,
        summary=summary,
        source=source,
        aliases=_strings(entry, "aliases", where),
        details=_text(entry, "details", where) or "",
        references=_strings(entry, "references", where),
        branch=branch,
        introduced=bounds["introduced"],
        fixed=bounds["fixed"],
        commits=commits,
        variants=_strings(affected, "variants", f"{where}.affected"),
        sha256=frozenset(hashes),
        fix=fix,
    )


def _fix(table: Any, where: str) -> Fix | None:
    if table is None:
        return None
    if not isinstance(table, dict) or len(table) != 1 or set(table) - _FIX_KEYS:
        raise ConfigError(
            f"{where} [advisory.fix] must name exactly one of version, revision or commit",
            fix=FORMAT_FIX,
        )
    version = table.get("version")
    if "version" in table and (
        isinstance(version, bool) or not isinstance(version, int) or version < 0
    ):
        raise ConfigError(f"{where}.fix.version must be a non-negative integer", fix=FORMAT_FIX)
    revision = _text(table, "revision", f"{where}.fix")
    commit = _commit(_text(table, "commit", f"{where}.fix"), "commit", f"{where}.fix")
    return Fix(version=version, revision=revision, commit=commit)


def first_advisory(
    advisories: Iterable[Advisory],
    names: Iterable[str],
    commit: str,
    ref: str | None,
    variant: str,
    sha256s: Iterable[str] = (),
    history_of: Any = None,
) -> tuple[Advisory | None, list[Advisory]]:
    """The first advisory that covers a build of a repo known by `names`, and those that cannot tell
    offline.

    `history_of(repo, branch)` gives a branch's commits (newest first) where the Hub can be asked;
    None: offline.
    """
    hashes = frozenset(sha256s)
    undecided: list[Advisory] = []
    known = set(names)
    for advisory in advisories:
        if advisory.repo not in known:
            continue
        history = (
            history_of(advisory.repo, advisory.branch)
            if history_of is not None and advisory.branch
            else None
        )
        verdict = advisory.affects(advisory.repo, commit, ref, variant, hashes, history)
        if verdict:
            return advisory, undecided
        if verdict is None:
            undecided.append(advisory)
    return None, undecided
