"""The test Hub's storage: git repositories read as the Hub reports them (files, LFS, commits)."""

from __future__ import annotations

import hashlib
import re
import subprocess
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from kernlock.testing.fixtures import git

_SHA_RE = re.compile(r"[0-9a-f]{40}")
_LFS_POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n"


@dataclass(frozen=True)
class Entry:
    """A file or directory of a commit, as the Hub reports it."""

    path: str
    type: str  # "file" or "directory"
    oid: str  # git tree id, blob id, or LFS pointer blob id
    size: int
    blob: str = ""  # git blob id of the actual content (files only)
    lfs: dict[str, Any] | None = None
    xet_hash: str | None = None

    def to_json(
        self, last_commit: dict[str, str] | None = None, xet: bool = False
    ) -> dict[str, Any]:
        data: dict[str, Any] = {
            "type": self.type,
            "oid": self.oid,
            "size": self.size,
            "path": self.path,
        }
        if self.lfs is not None:
            data["lfs"] = self.lfs
        if xet and self.xet_hash is not None:
            data["xetHash"] = self.xet_hash
        if last_commit is not None:
            data["lastCommit"] = last_commit
            if self.type == "file":
                data["securityFileStatus"] = {
                    "status": "safe",
                    "avScan": None,
                    "pickleImportScan": None,
                }
        return data


def iso_time(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _is_lfs(path: str, content: bytes) -> bool:
    return path.endswith(".so") or b"\0" in content


class GitRepo:
    """Read access to one git repository.

    Per-commit data is cached for the whole process, by commit and blob id: an id names its content
    (and a commit its history), so copies of a repository and later hubs over it share the cache.
    """

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _entries: ClassVar[dict[str, dict[str, Entry]]] = {}
    _last_commits: ClassVar[dict[str, dict[str, dict[str, str]]]] = {}
    _blobs: ClassVar[dict[str, bytes]] = {}
    _commit_infos: ClassVar[dict[str, tuple[int, str]]] = {}
    _frozen_refs: ClassVar[dict[Path, dict[str, str]]] = {}  # refs of immutable repositories
    # (immutable repository, a commit SHA in it)
    _frozen_commits: ClassVar[set[tuple[Path, str]]] = set()

    def __init__(self, path: Path, immutable: bool = False) -> None:
        """``immutable``: nothing changes the repository while any hub serves it, so its refs are
        read once."""
        self.path = path
        self.immutable = immutable

    def refs(self) -> dict[str, str]:
        """Full ref name -> commit SHA (read fresh unless immutable: branches move)."""
        if self.immutable and self.path in self._frozen_refs:
            return dict(self._frozen_refs[self.path])
        out = git(self.path, "for-each-ref", "--format=%(refname) %(objectname) %(*objectname)")
        refs = {}
        for line in out.decode().splitlines():
            name, oid, peeled = (line.split(" ") + [""])[:3]
            refs[name] = peeled or oid
        if self.immutable:
            self._frozen_refs[self.path] = dict(refs)
        return refs

    def resolve(self, rev: str) -> str | None:
        """Commit SHA for a branch, tag, full ref name or full SHA; None if unknown."""
        if (self.path, rev) in self._frozen_commits:
            return rev
        refs = self.refs()
        for name in (rev, f"refs/heads/{rev}", f"refs/tags/{rev}"):
            if name.startswith("refs/") and name in refs:
                return refs[name]
        if _SHA_RE.fullmatch(rev):
            kind = subprocess.run(
                ["git", "-C", str(self.path), "cat-file", "-t", rev], capture_output=True, text=True
            ).stdout.strip()
            if kind != "commit":
                return None
            if self.immutable:
                self._frozen_commits.add((self.path, rev))
            return rev
        return None

    def entries(self, commit: str) -> dict[str, Entry]:
        """All files and directories of ``commit`` by path (the root is ``""``)."""
        with self._lock:
            if commit not in self._entries:
                self._entries[commit] = self._read_entries(commit)
            return self._entries[commit]

    def content(self, entry: Entry) -> bytes:
        return self._blobs[entry.blob]

    def commit_info(self, commit: str) -> tuple[int, str]:
        """(committer timestamp, title) of ``commit``."""
        if commit not in self._commit_infos:
            timestamp, _, title = (
                git(self.path, "log", "-1", "--format=%ct %s", commit)
                .decode()
                .strip()
                .partition(" ")
            )
            self._commit_infos[commit] = (int(timestamp), title)
        return self._commit_infos[commit]

    def last_commits(self, commit: str) -> dict[str, dict[str, str]]:
        """Path -> the Hub's ``lastCommit`` (last commit touching it, up to ``commit``)."""
        with self._lock:
            if commit not in self._last_commits:
                self._last_commits[commit] = self._read_last_commits(commit)
            return self._last_commits[commit]

    def _read_entries(self, commit: str) -> dict[str, Entry]:
        tree = git(self.path, "rev-parse", f"{commit}^{{tree}}").decode().strip()
        listing = git(self.path, "ls-tree", "-r", "-t", "-l", "-z", commit).decode().split("\0")
        rows = []
        for line in filter(None, listing):
            meta, path = line.split("\t", 1)
            _mode, kind, oid, size = meta.split()
            rows.append((path, kind, oid, size))
        self._read_blobs(
            [oid for _, kind, oid, _ in rows if kind == "blob" and oid not in self._blobs]
        )
        entries = {"": Entry(path="", type="directory", oid=tree, size=0)}
        for path, kind, oid, size in rows:
            if kind == "tree":
                entries[path] = Entry(path=path, type="directory", oid=oid, size=0)
                continue
            content = self._blobs[oid]
            if _is_lfs(path, content):
                sha256 = hashlib.sha256(content).hexdigest()
                pointer = _LFS_POINTER.format(sha256=sha256, size=len(content)).encode()
                pointer_oid = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
                lfs = {"oid": sha256, "size": len(content), "pointerSize": len(pointer)}
                xet_hash = hashlib.sha256(b"xet\0" + content).hexdigest()
                entries[path] = Entry(
                    path, "file", pointer_oid, len(content), blob=oid, lfs=lfs, xet_hash=xet_hash
                )
            else:
                entries[path] = Entry(path, "file", oid, int(size), blob=oid)
        return entries

    def _read_blobs(self, oids: list[str]) -> None:
        if not oids:
            return
        out = git(
            self.path, "cat-file", "--batch", input="".join(f"{oid}\n" for oid in oids).encode()
        )
        pos = 0
        for oid in oids:
            header_end = out.index(b"\n", pos)
            size = int(out[pos:header_end].split()[2])
            self._blobs[oid] = out[header_end + 1 : header_end + 1 + size]
            pos = header_end + 1 + size + 1

    def _read_last_commits(self, commit: str) -> dict[str, dict[str, str]]:
        log = git(self.path, "log", "--format=\x01%H %ct %s", "--name-only", commit).decode()
        result: dict[str, dict[str, str]] = {}
        for block in filter(None, log.split("\x01")):
            header, *paths = block.strip("\n").split("\n")
            sha, timestamp, title = (header.split(" ", 2) + [""])[:3]
            info = {"id": sha, "title": title, "date": iso_time(int(timestamp))}
            result.setdefault("", info)
            for path in filter(None, paths):
                parts = path.split("/")
                for i in range(1, len(parts) + 1):
                    result.setdefault("/".join(parts[:i]), info)
        return result
