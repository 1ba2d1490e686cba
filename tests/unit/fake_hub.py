"""An in-memory Hub with the interface `Resolver` uses: refs, renames, commits, trust, trees, files."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from kernlock._internal.hub.responses import Ref, TreeFile, git_blob_id
from kernlock.errors import HubError, ResolutionError


def sha(text: str) -> str:
    """A deterministic 40-hex commit id."""
    return hashlib.sha1(text.encode()).hexdigest()


@dataclass
class FakeHub:
    """Repos as {repo: {commit: {path: bytes}}} with branches and tags; counts every call."""

    files: dict[str, dict[str, dict[str, bytes]]] = field(default_factory=dict)
    branches: dict[str, dict[str, str]] = field(default_factory=dict)
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    history: dict[str, list[str]] = field(default_factory=dict)  # repo -> commits, newest first
    trusted: set[str] = field(default_factory=lambda: {"kernels-community"})
    renamed: dict[str, str] = field(default_factory=dict)
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def add_commit(self, repo: str, branch: str, variants: dict[str, dict[str, bytes]], tag: str | None = None) -> str:
        """Commit `variants` ({variant: {path: bytes}}) on `branch`; returns the commit id."""
        commit = sha(f"{repo}:{branch}:{len(self.history.get(repo, []))}:{sorted(variants)}")
        self.files.setdefault(repo, {})[commit] = {
            f"build/{variant}/{path}": data for variant, contents in variants.items() for path, data in contents.items()
        }
        self.branches.setdefault(repo, {})[branch] = commit
        if tag:
            self.tags.setdefault(repo, {})[tag] = commit
        self.history.setdefault(repo, []).insert(0, commit)
        return commit

    def _repo(self, repo: str) -> str:
        repo = self.renamed.get(repo, repo)
        if repo not in self.files:
            raise HubError(f"{repo}: repository not found on the Hub", fix="check the spelling")
        return repo

    def refs(self, repo: str) -> list[Ref]:
        self.calls.append(("refs", repo))
        repo = self._repo(repo)
        return [Ref(name, "branch", c) for name, c in self.branches[repo].items()] + [
            Ref(name, "tag", c) for name, c in self.tags.get(repo, {}).items()
        ]

    def canonical_repo(self, repo: str) -> str:
        return self.renamed.get(repo, repo)

    def commits(self, repo: str, revision: str) -> list[str]:
        self.calls.append(("commits", repo, revision))
        return list(self.history[self._repo(repo)])

    def publisher_trusted(self, org: str) -> bool:
        return org in self.trusted

    def tree(self, repo: str, commit: str, path: str = "build") -> list[TreeFile]:
        self.calls.append(("tree", repo, commit))
        contents = self.files[self._repo(repo)].get(commit)
        if contents is None:
            raise ResolutionError(f"{repo}: revision not found: {commit}", fix="check the revision")
        return [TreeFile(p, len(d), git_blob_id(d), None) for p, d in sorted(contents.items()) if p.startswith(path + "/")]

    def fetch(self, repo: str, commit: str, path: str, blob_id: str, size: int | None = None) -> bytes:
        self.calls.append(("fetch", repo, commit, path))
        data = self.files[self._repo(repo)][commit][path]
        assert git_blob_id(data) == blob_id
        return data
