"""A Hugging Face Hub-compatible HTTP server for kernel repos, backed by real git repositories.

It implements the subset of the Hub API that ``huggingface_hub`` and ``kernels``
use for ``repo_type="kernel"``:

- ``GET  /api/kernels/{repo}/refs``                      branches and tags
- ``GET  /api/kernels/{repo}/tree/{rev}[/{path}]``       ``recursive`` and ``expand``, paginated (``Link: rel="next"``)
- ``GET  /api/kernels/{repo}[/revision/{rev}]``          repo info (``siblings``; ``blobs=true`` adds metadata)
- ``POST /api/kernels/{repo}/paths-info/{rev}``          form or JSON body with ``paths`` and ``expand``
- ``GET|HEAD /kernels/{repo}/resolve/{rev}/{path}``      file bytes (single ``Range`` supported)
- ``GET  /api/kernels/{repo}/commits/{rev}``              commit history (newest first)
- ``GET  /api/organizations/{org}/overview``             with ``trustedKernelPublisher``
- ``GET  /api/agent-harnesses``                          huggingface_hub's agent registry (empty)

A renamed repo answers every route under its old name with a 307 to the new one,
as the Hub does.

Revisions are branch names, tag names, full ref names (``refs/heads/v1``) or full
commit SHAs. Files are stored as plain blobs in git; a file is reported as LFS
when its name ends in ``.so`` or its content contains a NUL byte. For LFS files
the tree ``oid`` is the git id of the LFS pointer file the real Hub would store,
``lfs.oid`` is the sha256 of the content.

Real-Hub transport behaviours, each an attribute a test can switch:

- ``cdn_redirect`` (on): ``resolve`` of an LFS file answers 302 to a second "CDN"
  server on another port; ``X-Linked-Etag`` (the sha256), ``X-Linked-Size`` and
  ``X-Repo-Commit`` are on the 302 only, and the CDN's own ``ETag`` is a different
  64-hex value. Off: the file is served directly with the sha256 as ``ETag``.
- ``xet`` (on): tree entries of LFS files carry ``xetHash``. There is no Xet server:
  clients must fetch over plain HTTP (huggingface_hub does once ``HF_HUB_DISABLE_XET``
  is set or hf_xet is absent; resolve answers carry no ``X-Xet-Hash``).
- ``tree_page_size`` (1000, 50 with ``expand``; the Hub's sizes): longer listings
  are paginated with ``Link: <…>; rel="next"``.
- ``rate_limits`` (``{"api": 500, "resolvers": 3000}`` per ``rate_window`` = 300 s,
  the anonymous quotas): every answer carries ``RateLimit``/``RateLimit-Policy``;
  requests beyond the quota of the current fixed window (windows follow on from a
  bucket's first request) get 429. ``None``: off.
- faults (``add_fault``), among them ``stall`` (accept, never answer), ``slowloris``
  (headers, then a byte now and then) and ``endless`` (a body that never ends).
  ``fired`` counts, per kind, the faults that actually hit a request.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from kernlock.testing.fixtures import default_fixtures_dir, ensure_fixture_repos, git

FAULT_KINDS = ("status", "reset", "truncate", "corrupt", "delay", "respond", "stall", "slowloris", "endless")
RATE_LIMITS = {"api": 500, "resolvers": 3000}  # the Hub's anonymous quotas per window
RATE_WINDOW = 300.0  # seconds; the Hub counts in fixed 5-minute windows
TREE_PAGE_SIZE = 1000
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

    def to_json(self, last_commit: dict[str, str] | None = None, xet: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type, "oid": self.oid, "size": self.size, "path": self.path}
        if self.lfs is not None:
            data["lfs"] = self.lfs
        if xet and self.xet_hash is not None:
            data["xetHash"] = self.xet_hash
        if last_commit is not None:
            data["lastCommit"] = last_commit
            if self.type == "file":
                data["securityFileStatus"] = {"status": "safe", "avScan": None, "pickleImportScan": None}
        return data


def _iso(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _is_lfs(path: str, content: bytes) -> bool:
    return path.endswith(".so") or b"\0" in content


class GitRepo:
    """Read access to one git repository; per-commit data is cached (commits are immutable)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Entry]] = {}
        self._last_commits: dict[str, dict[str, dict[str, str]]] = {}
        self._blobs: dict[str, bytes] = {}

    def refs(self) -> dict[str, str]:
        """Full ref name -> commit SHA (read fresh: branches move)."""
        out = git(self.path, "for-each-ref", "--format=%(refname) %(objectname) %(*objectname)")
        refs = {}
        for line in out.decode().splitlines():
            name, oid, peeled = (line.split(" ") + [""])[:3]
            refs[name] = peeled or oid
        return refs

    def resolve(self, rev: str) -> str | None:
        """Commit SHA for a branch, tag, full ref name or full SHA; None if unknown."""
        refs = self.refs()
        for name in (rev, f"refs/heads/{rev}", f"refs/tags/{rev}"):
            if name.startswith("refs/") and name in refs:
                return refs[name]
        if _SHA_RE.fullmatch(rev):
            kind = subprocess.run(
                ["git", "-C", str(self.path), "cat-file", "-t", rev], capture_output=True, text=True
            ).stdout.strip()
            return rev if kind == "commit" else None
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
        timestamp, _, title = git(self.path, "log", "-1", "--format=%ct %s", commit).decode().strip().partition(" ")
        return int(timestamp), title

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
        self._read_blobs([oid for _, kind, oid, _ in rows if kind == "blob" and oid not in self._blobs])
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
                entries[path] = Entry(path, "file", pointer_oid, len(content), blob=oid, lfs=lfs, xet_hash=xet_hash)
            else:
                entries[path] = Entry(path, "file", oid, int(size), blob=oid)
        return entries

    def _read_blobs(self, oids: list[str]) -> None:
        if not oids:
            return
        out = git(self.path, "cat-file", "--batch", input="".join(f"{oid}\n" for oid in oids).encode())
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
            info = {"id": sha, "title": title, "date": _iso(int(timestamp))}
            result.setdefault("", info)
            for path in filter(None, paths):
                parts = path.split("/")
                for i in range(1, len(parts) + 1):
                    result.setdefault("/".join(parts[:i]), info)
        return result


@dataclass
class Fault:
    """An injected failure affecting the next ``times`` requests whose path matches ``match``."""

    kind: str
    match: str
    times: int
    method: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class HubError(Exception):
    """An error answered in the Hub's shape (``X-Error-Code`` header, JSON ``error`` body)."""

    def __init__(self, status: int, code: str | None, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.response = _json_response({"error": message}, status)
        if code:
            self.response.headers["X-Error-Code"] = code
            self.response.headers["X-Error-Message"] = message
        self.response.headers.update(headers or {})


def _json_response(data: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(data).encode(), {"Content-Type": "application/json; charset=utf-8"})


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true")


def _ranged(content: bytes, headers: dict[str, str], range_header: str | None) -> Response:
    """A 200 with ``content``, or a 206 for a single satisfiable ``bytes=`` range."""
    match = re.fullmatch(r"bytes=(\d+)-(\d*)", range_header or "")
    if match and int(match[1]) < len(content):
        start = int(match[1])
        end = min(int(match[2]) if match[2] else len(content) - 1, len(content) - 1)
        return Response(206, content[start : end + 1], {**headers, "Content-Range": f"bytes {start}-{end}/{len(content)}"})
    return Response(200, content, headers)


class TestHub:
    """Threaded Hub-compatible server on 127.0.0.1 serving git repos as kernel repos.

    ``requests`` counts requests by endpoint kind ("refs", "tree", "revision",
    "paths-info", "resolve", "cdn", "overview", "model", "other"); ``log`` lists ``(method, path)``;
    ``fired`` counts faults (by kind, and ``"429"`` for rate-limited answers) that hit a request,
    ``first_fired`` says when (``time.monotonic()``) each kind first did.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        repos: dict[str, Path],
        trusted_orgs: set[str] | frozenset[str] = frozenset({"kernels-community"}),
        latency: float = 0.0,
        renames: dict[str, str] | None = None,
        models: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        self.repos = {repo_id: GitRepo(Path(path)) for repo_id, path in repos.items()}
        self.models = set(models)  # model repo ids: answered on /api/models/, not as kernels (as the Hub does)
        self.renames = dict(renames or {})  # old repo id -> new: answered with a 307, as the Hub does
        self.trusted_orgs = set(trusted_orgs)
        self.latency = latency
        self.cdn_redirect = True
        self.xet = True
        self.tree_page_size = TREE_PAGE_SIZE
        self.rate_limits: dict[str, int] | None = dict(RATE_LIMITS)
        self.rate_window = RATE_WINDOW
        self.fired: collections.Counter[str] = collections.Counter()
        self.first_fired: dict[str, float] = {}  # fault kind -> time.monotonic() it first hit a request
        self.cdn_url = ""
        self._cdn_blobs: dict[str, bytes] = {}
        self._windows: dict[str, tuple[float, int]] = {}  # bucket -> (window start, requests in it)
        self._stopping = threading.Event()
        self.requests: collections.Counter[str] = collections.Counter()
        self.log: list[tuple[str, str]] = []
        self.authorizations: list[str | None] = []
        self.bytes_sent = 0
        self.url = ""
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._cdn: ThreadingHTTPServer | None = None

    def start(self, port: int = 0) -> TestHub:
        """Start serving on 127.0.0.1:``port`` (0: a free port), and the CDN on another port."""
        self._stopping.clear()
        self._server = self._serve(port, cdn=False)
        self._cdn = self._serve(0, cdn=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.cdn_url = f"http://127.0.0.1:{self._cdn.server_address[1]}"
        return self

    def _serve(self, port: int, cdn: bool) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), type("Handler", (_Handler,), {"hub": self, "cdn": cdn}))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="TestHub-CDN" if cdn else "TestHub", daemon=True).start()
        return server

    def stop(self) -> None:
        """Stop serving (ending stalled and endless answers) and close the listening sockets."""
        self._stopping.set()
        for server in (self._server, self._cdn):
            if server is not None:
                server.shutdown()
                server.server_close()
        self._server = self._cdn = None

    def __enter__(self) -> TestHub:
        return self if self._server is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def repo_path(self, repo_id: str) -> Path:
        """The git repository served as ``repo_id``."""
        return self.repos[repo_id].path

    def reset_counts(self) -> None:
        """Forget request counts, the request log and ``bytes_sent``."""
        with self._lock:
            self.requests.clear()
            self.log.clear()
            self.authorizations.clear()
            self.fired.clear()
            self.first_fired.clear()
            self.bytes_sent = 0

    def add_fault(
        self, kind: str, *, match: str = "", times: int = 1, method: str | None = None, **params: Any
    ) -> None:
        """Inject a failure into the next ``times`` requests whose path matches regex ``match``
        (and whose HTTP method is ``method``, if given).

        Kinds: ``status`` (``code`` = 500, optional ``retry_after``), ``reset`` (connection reset
        mid-body), ``truncate`` (fewer bytes than ``Content-Length``, then close), ``corrupt``
        (bytes of the body flipped), ``delay`` (sleep ``seconds`` = 1.0 before answering),
        ``respond`` (answer with ``body`` — bytes, str or JSON-able — ``status`` = 200 and
        optional ``headers`` instead: a hostile or broken Hub), ``stall`` (read the request,
        never answer), ``slowloris`` (headers, then one byte every ``interval`` = 0.2 s),
        ``endless`` (the headers without ``Content-Length``, then a body that never ends).
        The last three hold the connection until the client leaves or the Hub stops.
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"Unknown fault kind {kind!r}, expected one of {FAULT_KINDS}")
        with self._lock:
            self._faults.append(Fault(kind, match, times, method, params))

    def _record(self, method: str, path: str, kind: str, authorization: str | None = None) -> Fault | None:
        """Count a request (and the Authorization header it carried) and take the first matching fault."""
        with self._lock:
            self.requests[kind] += 1
            self.log.append((method, path))
            self.authorizations.append(authorization)
            for fault in self._faults:
                if re.search(fault.match, path) and fault.method in (None, method):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    self.fired[fault.kind] += 1
                    self.first_fired.setdefault(fault.kind, time.monotonic())
                    return fault
        return None

    def _rate_limit(self, kind: str) -> tuple[dict[str, str], bool]:
        """The RateLimit headers for a request of ``kind``, and whether it is over the quota (a 429)."""
        bucket = "resolvers" if kind == "resolve" else "api" if kind not in ("cdn", "agent-registry") else None
        if self.rate_limits is None or bucket not in self.rate_limits:
            return {}, False
        quota, window = self.rate_limits[bucket], self.rate_window
        now = time.time()
        with self._lock:
            anchor = self._windows.get(bucket, (now, 0))[0]  # windows follow on from the bucket's first request
            start = anchor + (now - anchor) // window * window
            seen_start, count = self._windows.get(bucket, (start, 0))
            count = count + 1 if seen_start == start else 1
            self._windows[bucket] = (start, count)
            over = count > quota
            if over:
                self.fired["429"] += 1
        reset = max(1, int(start + window - now + 0.999))
        return {
            "RateLimit": f'"{bucket}";r={max(0, quota - count)};t={reset}',
            "RateLimit-Policy": f'"fixed window";"{bucket}";q={quota};w={int(window)}',
        }, over

    def _renamed(self, path: str) -> str | None:
        """The new path of a request to a renamed repo, if it is one."""
        for old, new in self.renames.items():
            for prefix in ("/api/kernels/", "/kernels/"):
                if path.startswith(f"{prefix}{old}/") or path == f"{prefix}{old}":
                    return prefix + new + path[len(prefix) + len(old):]
        return None

    def _count_bytes(self, n: int) -> None:
        with self._lock:
            self.bytes_sent += n

    # Endpoints.

    def _repo(self, repo_id: str) -> GitRepo:
        repo = self.repos.get(repo_id)
        if repo is None:
            raise HubError(404, "RepoNotFound", "Repository not found")
        return repo

    def _commit(self, repo: GitRepo, rev: str) -> str:
        commit = repo.resolve(rev)
        if commit is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return commit

    def refs(self, repo_id: str) -> Response:
        refs = self._repo(repo_id).refs()

        def section(prefix: str) -> list[dict[str, str]]:
            return [
                {"name": name[len(prefix) :], "ref": name, "targetCommit": sha}
                for name, sha in sorted(refs.items())
                if name.startswith(prefix)
            ]

        return _json_response(
            {
                "branches": section("refs/heads/"),
                "converts": section("refs/convert/"),
                "tags": section("refs/tags/"),
                "pullRequests": section("refs/pr/"),
            }
        )

    def tree(self, repo_id: str, rev: str, path: str, recursive: bool, expand: bool, cursor: str | None = None,
             page_url: str = "") -> Response:
        repo = self._repo(repo_id)
        commit = self._commit(repo, rev)
        entries = repo.entries(commit)
        path = path.strip("/")
        if path not in entries:
            raise HubError(404, "EntryNotFound", f"{path} does not exist on {rev}")
        if entries[path].type == "file":
            selected = [entries[path]]
        else:
            prefix = f"{path}/" if path else ""
            selected = [
                e
                for p, e in entries.items()
                if p and p.startswith(prefix) and (recursive or "/" not in p[len(prefix) :])
            ]
        last = repo.last_commits(commit) if expand else {}
        size = max(1, self.tree_page_size if not expand else min(50, self.tree_page_size))
        start = int(cursor or 0) if (cursor or "0").isdigit() else 0
        page = sorted(selected, key=lambda e: e.path)[start : start + size]
        response = _json_response([e.to_json(last.get(e.path), self.xet) for e in page])
        if start + size < len(selected):
            separator = "&" if "?" in page_url else "?"
            response.headers["Link"] = f'<{self.url}{page_url}{separator}cursor={start + size}>; rel="next"'
        return response

    def paths_info(self, repo_id: str, rev: str, paths: list[str], expand: bool) -> Response:
        repo = self._repo(repo_id)
        commit = self._commit(repo, rev)
        entries = repo.entries(commit)
        last = repo.last_commits(commit) if expand else {}
        found = [entries[p.strip("/")] for p in paths if p.strip("/") in entries and p.strip("/")]
        return _json_response([e.to_json(last.get(e.path), self.xet) for e in found])

    def repo_info(self, repo_id: str, rev: str, blobs: bool) -> Response:
        repo = self._repo(repo_id)
        commit = self._commit(repo, rev)
        timestamp, _ = repo.commit_info(commit)
        siblings = []
        for entry in sorted(repo.entries(commit).values(), key=lambda e: e.path):
            if entry.type != "file":
                continue
            sibling: dict[str, Any] = {"rfilename": entry.path}
            if blobs:
                sibling.update(size=entry.size, blobId=entry.oid)
                if entry.lfs is not None:
                    sibling["lfs"] = {"sha256": entry.lfs["oid"], **entry.lfs}
            siblings.append(sibling)
        org = repo_id.split("/")[0]
        return _json_response(
            {
                "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
                "id": repo_id,
                "author": org,
                "sha": commit,
                "lastModified": _iso(timestamp),
                "private": False,
                "gated": False,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "tags": ["kernel"],
                "siblings": siblings,
            }
        )

    def resolve(self, repo_id: str, rev: str, path: str, range_header: str | None) -> Response:
        repo = self._repo(repo_id)
        commit = self._commit(repo, rev)
        entry = repo.entries(commit).get(path)
        if entry is None or entry.type != "file":
            raise HubError(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": commit})
        content = repo.content(entry)
        headers = {
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            "X-Repo-Commit": commit,
            "ETag": f'"{entry.lfs["oid"] if entry.lfs else entry.oid}"',
        }
        if entry.lfs is not None:
            headers["X-Linked-Etag"] = f'"{entry.lfs["oid"]}"'
            headers["X-Linked-Size"] = str(entry.size)
            if self.cdn_redirect:
                with self._lock:
                    self._cdn_blobs[entry.lfs["oid"]] = content
                location = f"{self.cdn_url}/cdn/{entry.lfs['oid']}/{path.rsplit('/', 1)[-1]}?Expires=9999999999"
                text = f"Found. Redirecting to {location}".encode()
                return Response(302, text, {
                    "Content-Type": "text/plain; charset=utf-8", "Location": location, "X-Repo-Commit": commit,
                    "X-Linked-Etag": headers["X-Linked-Etag"], "X-Linked-Size": headers["X-Linked-Size"],
                    "ETag": f'W/"{hashlib.sha1(text).hexdigest()[:27]}"',
                })
        return _ranged(content, headers, range_header)

    def cdn(self, sha256: str, range_header: str | None) -> Response:
        """The CDN's answer for a blob: the bytes, with the CDN's own (different) ETag and no Hub headers."""
        with self._lock:
            content = self._cdn_blobs.get(sha256)
        if content is None:
            return Response(403, b"<Error><Code>AccessDenied</Code></Error>", {"Content-Type": "application/xml"})
        headers = {
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            "ETag": f'"{hashlib.sha256(b"cdn" + content).hexdigest()}"',
            "Cache-Control": "public, max-age=604800, immutable",
        }
        return _ranged(content, headers, range_header)

    def commits(self, repo_id: str, rev: str) -> Response:
        """Commits reachable from ``rev``, newest first (``list_repo_commits``)."""
        repo = self._repo(repo_id)
        commit = self._commit(repo, rev)
        out = git(repo.path, "log", "--format=%H%x09%ct%x09%s", commit).decode()
        items = []
        for line in out.splitlines():
            sha, timestamp, title = line.split("\t", 2)
            items.append({"id": sha, "title": title, "message": "", "date": _iso(int(timestamp)),
                          "authors": [{"user": "fixture"}]})
        return _json_response(items)

    def model_info(self, repo_id: str) -> Response:
        if repo_id not in self.models:
            raise HubError(404, "RepoNotFound", "Repository not found")
        return _json_response({"_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24], "id": repo_id,
                               "modelId": repo_id, "author": repo_id.split("/")[0], "private": False,
                               "gated": False, "disabled": False, "tags": [], "siblings": []})

    def overview(self, org: str) -> Response:
        if org not in self.trusted_orgs and not any(r.split("/")[0] == org for r in self.repos):
            return _json_response({"error": "Organization not found"}, 404)
        return _json_response(
            {
                "avatarUrl": f"{self.url}/avatars/{org}.png",
                "name": org,
                "fullname": org,
                "isVerified": False,
                "isFollowing": False,
                "numUsers": 1,
                "numModels": 0,
                "numSpaces": 0,
                "numDatasets": 0,
                "numFollowers": 0,
                "numPapers": 0,
                "numKernels": sum(r.split("/")[0] == org for r in self.repos),
                "trustedKernelPublisher": org in self.trusted_orgs,
            }
        )


_API_REPO = re.compile(r"/api/kernels/([^/]+)/([^/]+)(?:/(refs|tree|revision|paths-info|commits)(?:/([^/]+)(/.*)?)?)?")
_RESOLVE = re.compile(r"/kernels/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)")
_CDN = re.compile(r"/cdn/([0-9a-f]{64})/[^/]+")
_MODEL = re.compile(r"/api/models/([^/]+)/([^/]+)")
_OVERVIEW = re.compile(r"/api/organizations/([^/]+)/overview")


class _Handler(BaseHTTPRequestHandler):
    """Routes requests to a ``TestHub`` and applies its latency and faults."""

    hub: TestHub
    cdn: bool
    protocol_version = "HTTP/1.1"
    timeout = 60

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else b""
        kind, call = self._route(method, url.path, query, body)
        fault = self.hub._record(method, url.path, kind, self.headers.get("Authorization"))
        limits, over = self.hub._rate_limit(kind)
        moved = self.hub._renamed(url.path)
        if over:
            response = _json_response({"error": "You have exceeded our rate limit, please retry later"}, 429)
        elif moved is not None:
            response = Response(307, b"", {"Location": moved + (f"?{url.query}" if url.query else "")})
        else:
            try:
                response = call() if call is not None else _json_response({"error": "Not found"}, 404)
            except HubError as error:
                response = error.response
        response.headers.update(limits)
        if self.hub.latency:
            time.sleep(self.hub.latency)
        self._send(method, response, fault)

    def _route(self, method: str, path: str, query: dict[str, str], body: bytes) -> tuple[str, Any]:
        hub = self.hub
        if self.cdn:
            if (m := _CDN.fullmatch(path)) and method in ("GET", "HEAD"):
                return "cdn", lambda: hub.cdn(m[1], self.headers.get("Range"))
            return "cdn", None
        if m := _OVERVIEW.fullmatch(path):
            return "overview", lambda: hub.overview(unquote(m[1]))
        if (m := _MODEL.fullmatch(path)) and method == "GET":
            return "model", lambda: hub.model_info(f"{unquote(m[1])}/{unquote(m[2])}")
        if path == "/api/agent-harnesses":  # huggingface_hub's once-a-day agent registry lookup
            return "agent-registry", lambda: _json_response({"standardEnvVars": [], "harnesses": {}})
        if (m := _RESOLVE.fullmatch(path)) and method in ("GET", "HEAD"):
            repo_id, rev, file = f"{unquote(m[1])}/{unquote(m[2])}", unquote(m[3]), unquote(m[4])
            return "resolve", lambda: hub.resolve(repo_id, rev, file, self.headers.get("Range"))
        if m := _API_REPO.fullmatch(path):
            repo_id, action, rev = f"{unquote(m[1])}/{unquote(m[2])}", m[3], unquote(m[4] or "main")
            sub = unquote(m[5] or "")
            if action is None and method == "GET":
                return "revision", lambda: hub.repo_info(repo_id, "main", _flag(query.get("blobs")))
            if action == "refs" and method == "GET":
                return "refs", lambda: hub.refs(repo_id)
            if action == "revision" and method == "GET" and m[4] and not sub:
                return "revision", lambda: hub.repo_info(repo_id, rev, _flag(query.get("blobs")))
            if action == "tree" and method == "GET" and m[4]:
                recursive, expand = _flag(query.get("recursive")), _flag(query.get("expand"))
                return "tree", lambda: hub.tree(repo_id, rev, sub, recursive, expand, query.get("cursor"),
                                                self.path.split("&cursor=")[0].split("?cursor=")[0])
            if action == "commits" and method == "GET" and m[4] and not sub:
                return "commits", lambda: hub.commits(repo_id, rev)
            if action == "paths-info" and method == "POST" and m[4] and not sub:
                paths, expand = self._paths_info_body(body)
                return "paths-info", lambda: hub.paths_info(repo_id, rev, paths, expand)
        return "other", None

    def _paths_info_body(self, body: bytes) -> tuple[list[str], bool]:
        if "json" in (self.headers.get("Content-Type") or ""):
            data = json.loads(body or b"{}")
            paths = data.get("paths", [])
            return ([paths] if isinstance(paths, str) else list(paths)), bool(data.get("expand"))
        form = parse_qs(body.decode(), keep_blank_values=True)
        return form.get("paths", []), _flag((form.get("expand") or [""])[-1])

    def _send(self, method: str, response: Response, fault: Fault | None) -> None:
        body = response.body
        if fault is not None and fault.kind in ("stall", "slowloris", "endless"):
            self._hold(method, response, fault)
            return
        if fault is not None and fault.kind == "delay":
            time.sleep(float(fault.params.get("seconds", 1.0)))
        elif fault is not None and fault.kind == "status":
            code = int(fault.params.get("code", 500))
            response = _json_response({"error": f"Injected fault: HTTP {code}"}, code)
            if "retry_after" in fault.params:
                response.headers["Retry-After"] = str(fault.params["retry_after"])
            body = response.body
        elif fault is not None and fault.kind == "respond":
            payload = fault.params.get("body", b"")
            if not isinstance(payload, (bytes, str)):
                payload = json.dumps(payload)
            body = payload.encode() if isinstance(payload, str) else payload
            response = Response(int(fault.params.get("status", 200)), body, {
                "Content-Type": "application/json", **fault.params.get("headers", {})})
        elif fault is not None and fault.kind == "corrupt" and body:
            middle = len(body) // 2
            body = body[:middle] + bytes(b ^ 0xFF for b in body[middle : middle + 16]) + body[middle + 16 :]
        cut = fault is not None and fault.kind in ("reset", "truncate")
        if cut and (method == "HEAD" or not body):
            self._abort(reset=fault.kind == "reset")
            return
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method == "HEAD":
            return
        sent = body[: len(body) // 2] if cut else body
        self.wfile.write(sent)
        self.hub._count_bytes(len(sent))
        if cut:
            self._abort(reset=fault.kind == "reset")

    def _hold(self, method: str, response: Response, fault: Fault) -> None:
        """Hold the connection: say nothing (stall), drip the body (slowloris) or never end it (endless)."""
        stopping = self.hub._stopping
        self.close_connection = True
        if fault.kind == "stall":
            stopping.wait()
            return
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if fault.kind == "slowloris":
            self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if method == "HEAD":
            return
        interval = float(fault.params.get("interval", 0.2))
        body = iter(response.body) if fault.kind == "slowloris" else None
        try:
            while not stopping.is_set():
                if body is not None:
                    byte = next(body, None)
                    if byte is None:
                        return
                    chunk = bytes([byte])
                else:
                    chunk = b"\0" * 65536
                self.wfile.write(chunk)
                self.wfile.flush()
                self.hub._count_bytes(len(chunk))
                if body is not None:
                    stopping.wait(interval)
        except OSError:  # the client gave up
            return

    def _abort(self, *, reset: bool) -> None:
        """Close the connection: with a TCP RST if ``reset``, else a normal FIN."""
        self.wfile.flush()
        self.close_connection = True
        if reset:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        else:
            self.connection.shutdown(socket.SHUT_RDWR)


def main(argv: list[str] | None = None) -> None:
    """Build the fixture repos into ``--workdir`` (if absent) and serve them until killed."""
    parser = argparse.ArgumentParser(prog="python -m kernlock.testing.hub", description=main.__doc__)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free port)")
    parser.add_argument("--workdir", type=Path, required=True, help="directory holding the git repos")
    parser.add_argument("--fixtures", type=Path, default=default_fixtures_dir(), help="fixture TOML directory")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to sleep before each response")
    args = parser.parse_args(argv)

    repos = ensure_fixture_repos(args.fixtures, args.workdir)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with TestHub(repos, latency=args.latency).start(args.port) as hub:
        print(f"HF_ENDPOINT={hub.url}\nHF_HUB_DISABLE_XET=1", flush=True)  # no Xet server here: plain HTTP
        while not stop.wait(1.0):
            pass


if __name__ == "__main__":
    sys.exit(main())
