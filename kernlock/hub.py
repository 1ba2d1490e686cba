"""The Hub, as kernlock needs it: refs, trees with hashes, small files, publisher trust.

A thin layer over `huggingface_hub.HfApi` (so `HF_ENDPOINT`, `HF_TOKEN` and the
client's headers behave as users expect). Retries and concurrency live here and
nowhere else. Every failure becomes a one-line `HubError` naming the repo.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kernlock.errors import HubError

T = TypeVar("T")

RETRY_STATUS = (429, 500, 502, 503, 504)
_SHA1_RE = re.compile(r"[0-9a-f]{40}")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
MAX_ATTEMPTS = 4
BASE_DELAY = 0.2
MAX_DELAY = 4.0


@dataclass(frozen=True)
class Ref:
    """A branch or tag and the commit it points at."""

    name: str
    kind: str  # "branch" or "tag"
    commit: str


@dataclass(frozen=True)
class TreeFile:
    """A file in a repo tree: path, size, git blob id and LFS sha256 when the Hub stores it in LFS."""

    path: str
    size: int
    blob_id: str
    lfs_sha256: str | None


def git_blob_id(data: bytes) -> str:
    """The git blob SHA-1 of `data` (what the Hub reports as `oid` for non-LFS files)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def _status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def _retry_after(error: BaseException) -> float | None:
    response = getattr(error, "response", None)
    value = getattr(response, "headers", {}).get("Retry-After") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP library's transport errors (huggingface_hub 2.x uses httpx2, 1.x httpx)."""
    import importlib

    found: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def _is_transient(error: BaseException) -> bool:
    return isinstance(error, _transport_errors()) or _status(error) in RETRY_STATUS


def describe(error: BaseException, repo: str) -> str:
    """A one-line description of a Hub failure for `repo`, with the fix where there is one."""
    from huggingface_hub.errors import (
        GatedRepoError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    status = _status(error)
    if isinstance(error, GatedRepoError) or status in (401, 403):
        return (
            f"{repo}: access denied (HTTP {status}); the repo is gated or private: "
            "log in with `hf auth login` or set HF_TOKEN to a token with access"
        )
    if isinstance(error, RepositoryNotFoundError):
        return f"{repo}: repository not found on the Hub; check the spelling (or authenticate if it is private)"
    if isinstance(error, RevisionNotFoundError):
        return f"{repo}: revision not found on the Hub"
    if isinstance(error, RemoteEntryNotFoundError):
        return f"{repo}: file not found on the Hub"
    if status is not None:
        return f"{repo}: the Hub answered HTTP {status}; try again later"
    return f"{repo}: cannot reach the Hub ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"


class Hub:
    """Hub access for one resolution: memoised, retried, thread-safe."""

    def __init__(self, endpoint: str | None = None, token: str | bool | None = None, sleep: Callable[[float], None] = time.sleep):
        from huggingface_hub import HfApi

        self.api = HfApi(endpoint=endpoint, token=token, library_name="kernlock")
        self._sleep = sleep
        self._lock = threading.Lock()
        self._org_trust: dict[str, bool] = {}
        self._canonical: dict[str, str] = {}

    def _call(self, repo: str, fn: Callable[[], T]) -> T:
        """Run `fn` with bounded retries and exponential backoff on transient failures."""
        delay = BASE_DELAY
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return fn()
            except Exception as error:
                if attempt == MAX_ATTEMPTS or not _is_transient(error):
                    raise HubError(describe(error, repo)) from error
                wait = _retry_after(error)
                self._sleep(min(MAX_DELAY, wait if wait is not None else delay))
                delay *= 2
        raise AssertionError("unreachable")

    def refs(self, repo: str) -> list[Ref]:
        """Branches and tags of a kernel repo (following a rename redirect, see `canonical_repo`)."""
        from urllib.parse import urlsplit

        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = f"{self.api.endpoint}/api/kernels/{repo}/refs"
        headers = build_hf_headers(token=self.api.token, library_name="kernlock")

        def fetch() -> tuple[dict, str]:
            response = get_session().get(url, headers=headers, follow_redirects=True)
            hf_raise_for_status(response)
            return response.json(), urlsplit(str(response.url)).path

        data, final_path = self._call(repo, fetch)
        prefix = "/api/kernels/"
        if final_path.startswith(prefix) and final_path.endswith("/refs"):
            canonical = final_path[len(prefix):-len("/refs")]
            with self._lock:
                self._canonical[repo] = canonical
        refs = []
        try:
            for kind, key in (("branch", "branches"), ("tag", "tags")):
                refs.extend(Ref(str(item["name"]), kind, item["targetCommit"]) for item in data.get(key) or [])
        except (AttributeError, KeyError, TypeError):
            raise HubError(f"{repo}: the Hub answered the refs request with unexpected JSON") from None
        for ref in refs:
            if not isinstance(ref.commit, str) or not _SHA1_RE.fullmatch(ref.commit):
                raise HubError(f"{repo}: the Hub reported {ref.kind} {ref.name!r} at {ref.commit!r}, which is not a commit SHA")
        return refs

    def canonical_repo(self, repo: str) -> str:
        """The repo's current name: the Hub redirects renamed repos to it."""
        with self._lock:
            if repo in self._canonical:
                return self._canonical[repo]
        self.refs(repo)
        with self._lock:
            return self._canonical.get(repo, repo)

    def _get_pages(self, repo: str, url: str, params: dict[str, str]) -> list:
        """GET a JSON list endpoint, following the Hub's `Link: rel="next"` pagination.

        Uses the client's session and headers but not its internal retries, so
        the one retry policy here applies.
        """
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        headers = build_hf_headers(token=self.api.token, library_name="kernlock")
        items: list = []
        next_url: str | None = url
        first = True
        while next_url:
            def page(u: str = next_url, p: dict[str, str] | None = params if first else None):
                response = get_session().get(u, params=p, headers=headers)
                hf_raise_for_status(response)
                data = response.json()
                if not isinstance(data, list):
                    raise HubError(f"{repo}: the Hub answered {u} with unexpected JSON")
                return data, response.links.get("next", {}).get("url")

            data, next_url = self._call(repo, page)
            items.extend(data)
            first = False
        return items

    def commits(self, repo: str, revision: str) -> list[str]:
        """Commit SHAs reachable from `revision`, newest first."""
        from urllib.parse import quote

        url = f"{self.api.endpoint}/api/kernels/{repo}/commits/{quote(revision, safe='')}"
        return [str(item.get("id", "")) for item in self._get_pages(repo, url, {})]

    def tree(self, repo: str, commit: str, path: str = "build") -> list[TreeFile]:
        """Every file under `path` at `commit`, with sizes, blob ids and LFS hashes."""
        url = f"{self.api.endpoint}/api/kernels/{repo}/tree/{commit}/{path}"
        files = []
        for entry in self._get_pages(repo, url, {"recursive": "true"}):
            if not isinstance(entry, dict) or entry.get("type") != "file":
                continue
            try:
                lfs = entry.get("lfs")
                item = TreeFile(
                    path=str(entry["path"]),
                    size=int(entry["size"]),
                    blob_id=str(entry["oid"]),
                    lfs_sha256=str(lfs["oid"]) if lfs else None,
                )
            except (KeyError, TypeError, ValueError):
                raise HubError(f"{repo}: the Hub listed a malformed tree entry at {commit[:12]}") from None
            if (
                item.size < 0 or not _SHA1_RE.fullmatch(item.blob_id)
                or (item.lfs_sha256 is not None and not _SHA256_RE.fullmatch(item.lfs_sha256))
            ):
                raise HubError(f"{repo}: the Hub listed {item.path!r} at {commit[:12]} with an invalid size or hash")
            files.append(item)
        return files

    def fetch(self, repo: str, commit: str, path: str, blob_id: str) -> bytes:
        """Download one small file and check it against its git blob id."""
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = hf_hub_url(repo, path, repo_type="kernel", revision=commit, endpoint=self.api.endpoint)

        def fetch() -> bytes:
            response = get_session().get(url, headers=build_hf_headers(token=self.api.token, library_name="kernlock"))
            hf_raise_for_status(response)
            data = response.content
            if git_blob_id(data) != blob_id:
                raise ConnectionError(f"{path}: the downloaded bytes do not match the Hub's blob id")
            return data

        return self._call(repo, fetch)

    def download(self, repo: str, commit: str, path: str, destination: Path) -> str:
        """Stream one file at `commit` into `destination`; return the Hub's etag for it.

        Retried like every Hub call; a body cut short raises, so callers verify
        and rename into place only complete files.
        """
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = hf_hub_url(repo, path, repo_type="kernel", revision=commit, endpoint=self.api.endpoint)
        headers = build_hf_headers(token=self.api.token, library_name="kernlock")

        def fetch() -> str:
            with get_session().stream("GET", url, headers=headers, follow_redirects=True) as response:
                if response.status_code >= 400:
                    response.read()
                hf_raise_for_status(response)
                expected = response.headers.get("Content-Length")
                written = 0
                with open(destination, "wb") as out:
                    for chunk in response.iter_bytes():
                        out.write(chunk)
                        written += len(chunk)
                if expected is not None and written != int(expected):
                    raise ConnectionError(f"{path}: received {written} of {expected} bytes")
                etag = response.headers.get("X-Linked-Etag") or response.headers.get("ETag") or ""
                return etag.removeprefix("W/").strip('"')

        return self._call(repo, fetch)

    def publisher_trusted(self, org: str) -> bool:
        """Whether the Hub marks `org` as a trusted kernel publisher."""
        with self._lock:
            if org in self._org_trust:
                return self._org_trust[org]

        def fetch() -> bool:
            overview = self.api.get_organization_overview(org)
            return bool(getattr(overview, "trustedKernelPublisher", False))

        try:
            trusted = self._call(org, fetch)
        except HubError as error:
            if _status(error.__cause__) == 404:
                trusted = False
            else:
                raise
        with self._lock:
            self._org_trust[org] = trusted
        return trusted
