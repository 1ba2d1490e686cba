"""The Hub, as kernlock needs it: refs, trees with hashes, files, publisher trust.

A thin layer over huggingface_hub (its session, headers, `HF_ENDPOINT`, `HF_TOKEN`,
`get_hf_file_metadata` and RateLimit parsing), adding what it lacks: every request
bounded by connect/read timeouts (`HF_HUB_ETAG_TIMEOUT`, `HF_HUB_DOWNLOAD_TIMEOUT`), an
overall deadline with retries and waits included (`KERNLOCK_HUB_DEADLINE`) and a cap on
the bytes read; rate-limit waits bounded by `KERNLOCK_RATE_LIMIT_WAIT` and announced in
one line; redirects to another host never taken for a repo rename. Retries and
concurrency live here and nowhere else. Every failure becomes a one-line `HubError`
naming the repo.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urljoin, urlsplit

from kernlock.errors import HubError, KernlockError, redact

if TYPE_CHECKING:
    import httpx2

T = TypeVar("T")

RETRY_STATUS = (429, 500, 502, 503, 504)
_SHA1_RE = re.compile(r"[0-9a-f]{40}")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
MAX_ATTEMPTS = 4
BASE_DELAY = 0.2
MAX_REDIRECTS = 5
API_BODY_LIMIT = 64 << 20  # bytes: a JSON answer larger than this is not a Hub answer
ERROR_BODY_LIMIT = 64 << 10
DEADLINE_ENV = "KERNLOCK_HUB_DEADLINE"  # seconds one request or file download may take, retries and waits included
DEFAULT_DEADLINE = 600.0
RATE_LIMIT_WAIT_ENV = "KERNLOCK_RATE_LIMIT_WAIT"  # the longest wait for a rate-limit window to reset
DEFAULT_RATE_LIMIT_WAIT = 300.0

logger = logging.getLogger("kernlock")


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name) or default)
    except ValueError:
        return default
    return value if value > 0 else default


def etag_timeout() -> float:
    """Connect/read timeout of API calls and metadata requests (`HF_HUB_ETAG_TIMEOUT`, as huggingface_hub)."""
    from huggingface_hub import constants

    return _env_seconds("HF_HUB_ETAG_TIMEOUT", constants.HF_HUB_ETAG_TIMEOUT)


def download_timeout() -> float:
    """Connect/read timeout of file downloads (`HF_HUB_DOWNLOAD_TIMEOUT`, as huggingface_hub)."""
    from huggingface_hub import constants

    return _env_seconds("HF_HUB_DOWNLOAD_TIMEOUT", constants.HF_HUB_DOWNLOAD_TIMEOUT)


def hub_deadline() -> float:
    """Seconds one Hub request or file download may take in all (`KERNLOCK_HUB_DEADLINE`)."""
    return _env_seconds(DEADLINE_ENV, DEFAULT_DEADLINE)


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


def _status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def _retry_after(error: BaseException) -> float | None:
    """`Retry-After` in seconds; absent, negative, junk or an HTTP date all read as absent."""
    response = getattr(error, "response", None)
    value = str(getattr(response, "headers", {}).get("Retry-After") or "").strip()
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < float("inf") else None


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
    detail = str(error).splitlines()[0] if str(error) else ""
    return redact(f"{repo}: cannot reach the Hub ({type(error).__name__}: {detail})")


class _Stop(Exception):
    """A failure not worth retrying (a body over its size, a deadline passed); carries the final message."""



class Hub:
    """Hub access for one resolution: memoised, retried, thread-safe."""

    def __init__(self, endpoint: str | None = None, token: str | bool | None = None, sleep: Callable[[float], None] = time.sleep):
        from huggingface_hub import HfApi

        self.api = HfApi(endpoint=endpoint, token=token, library_name="kernlock")
        self._sleep = sleep
        self._lock = threading.Lock()
        self._org_trust: dict[str, bool] = {}
        self._org_locks: dict[str, threading.Lock] = {}
        self._canonical: dict[str, str] = {}
        self._hf_headers: dict[str, str] | None = None

    def _call(self, repo: str, fn: Callable[[float], T], deadline: float | None = None) -> T:
        """Run `fn(deadline)` with bounded retries on transient failures, all within one deadline.

        Waits follow the Hub's `RateLimit` header on a 429 (until the window resets, up to
        `KERNLOCK_RATE_LIMIT_WAIT`, announced in one line), else `Retry-After`, else backoff.
        """
        deadline = deadline if deadline is not None else time.monotonic() + hub_deadline()
        delay = BASE_DELAY
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return fn(deadline)
            except _Stop as error:
                raise HubError(f"{repo}: {error}") from None
            except KernlockError:
                raise
            except Exception as error:
                if attempt == MAX_ATTEMPTS or not _is_transient(error):
                    raise HubError(self._not_a_kernel(repo, error) or describe(error, repo)) from error
                wait = self._wait(repo, error, delay, deadline)
                self._sleep(wait)
                delay *= 2
        raise AssertionError("unreachable")

    def _not_a_kernel(self, repo: str, error: BaseException) -> str | None:
        """When the Hub has no kernel repo `repo` but a model repo of that name, say so (else None).

        The Hub answers 404 for the kernel endpoints of a model repo; `/api/models/<repo>` tells them apart.
        """
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

        if not isinstance(error, RepositoryNotFoundError):
            return None
        try:
            self.api.model_info(repo, timeout=etag_timeout())
        except GatedRepoError:
            pass
        except Exception:
            return None
        return (f"{repo} is a model repository, not a kernel repository; name the kernel repo to load instead "
                "(e.g. kernels-community/flash-attn2)")

    def _wait(self, repo: str, error: BaseException, backoff: float, deadline: float) -> float:
        """Seconds to wait before retrying after `error`, or a `HubError` when that is too long."""
        from huggingface_hub.utils import parse_ratelimit_headers

        response = getattr(error, "response", None)
        limit = parse_ratelimit_headers(response.headers) if _status(error) == 429 and response is not None else None
        left = deadline - time.monotonic()
        if limit is not None and limit.remaining == 0:
            wait = float(limit.reset_in_seconds)
            quota = f" ({limit.limit} requests per {limit.window_seconds} s)" if limit.limit else ""
            why = f"the Hub's {limit.resource_type!r} rate limit{quota} is used up"
            bound = min(_env_seconds(RATE_LIMIT_WAIT_ENV, DEFAULT_RATE_LIMIT_WAIT), left)
            if wait > bound:
                raise HubError(
                    f"{repo}: {why} for another {wait:.0f} s; re-run after that (logged-in users, with "
                    f"HF_TOKEN, get a larger quota), or allow a longer wait with {RATE_LIMIT_WAIT_ENV}"
                ) from None
            logger.warning("kernlock: %s: %s; waiting %.0f s for the window to reset", repo, why, wait)
            return wait
        retry_after = _retry_after(error)
        wait = retry_after if retry_after is not None else backoff
        if wait > left:
            raise HubError(
                f"{describe(error, repo)} (gave up: no answer within {hub_deadline():.0f} s, {DEADLINE_ENV})"
            ) from None
        if wait >= 1:
            logger.warning("kernlock: %s: the Hub answered HTTP %s; retrying in %.0f s", repo, _status(error), wait)
        return wait

    def _headers(self) -> dict[str, str]:
        """huggingface_hub's request headers, built once: building them can cost a request of its own
        (its once-a-day agent lookup), which parallel first calls would each make."""
        from huggingface_hub.utils import build_hf_headers

        with self._lock:
            if self._hf_headers is None:
                self._hf_headers = build_hf_headers(token=self.api.token, library_name="kernlock")
            return dict(self._hf_headers)

    def _request(self, url: str, deadline: float, *, timeout: float, limit: int, params: dict[str, str] | None = None,
                 sink: Callable[[bytes], None] | None = None, follow: bool = False,
                 headers: dict[str, str] | None = None) -> "httpx2.Response":
        """GET `url` with timeouts; read at most `limit` bytes before `deadline`; raise for HTTP errors.

        The body goes to `sink` (a successful answer) or into the returned, complete response.
        """
        import httpx2
        from huggingface_hub.utils import get_session, hf_raise_for_status

        with get_session().stream("GET", url, params=params, headers=headers or self._headers(),
                                  timeout=httpx2.Timeout(timeout), follow_redirects=follow) as response:
            ok = response.status_code < 300
            cap = limit if ok else ERROR_BODY_LIMIT
            declared = response.headers.get("Content-Length", "")
            if ok and declared.isdigit() and int(declared) > cap:
                raise _Stop(f"{redact(str(response.url))} announces {declared} bytes, more than the {cap} expected; "
                            "nothing was kept")
            chunks: list[bytes] = []
            received = 0
            for chunk in response.iter_bytes():
                received += len(chunk)
                if received > cap:
                    if not ok:
                        break
                    raise _Stop(f"{redact(str(response.url))} sent more than the {cap} bytes expected; nothing was kept")
                if time.monotonic() > deadline:
                    raise _Stop(f"{redact(str(response.url))} did not finish within {hub_deadline():.0f} s "
                                f"({DEADLINE_ENV}); nothing was kept")
                (sink if ok and sink is not None else chunks.append)(chunk)
            # The bytes are decoded already: drop the headers that would have them decoded twice.
            headers = [(k, v) for k, v in response.headers.multi_items()
                       if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
            complete = httpx2.Response(response.status_code, headers=headers, content=b"".join(chunks),
                                       request=response.request)
        if complete.status_code >= 400:
            hf_raise_for_status(complete)
        return complete

    def _api_get(self, repo: str, url: str, deadline: float, params: dict[str, str] | None = None) -> "httpx2.Response":
        """GET a Hub API URL, following redirects on the same host only (the Hub's answer for a renamed repo)."""
        for _ in range(MAX_REDIRECTS + 1):
            response = self._request(url, deadline, timeout=etag_timeout(), limit=API_BODY_LIMIT, params=params)
            if not response.is_redirect:
                return response
            target = urljoin(str(response.url), response.headers.get("Location", ""))
            if urlsplit(target).netloc != urlsplit(str(response.url)).netloc:
                raise _Stop(
                    f"{redact(str(response.url))} redirects to {redact(target)}, on another host; kernlock does not "
                    "follow it nor take it for a repo rename: check HF_ENDPOINT and your proxy"
                )
            url, params = target, None
        raise _Stop(f"{redact(url)}: more than {MAX_REDIRECTS} redirects")

    def refs(self, repo: str) -> list[Ref]:
        """Branches and tags of a kernel repo (following a rename redirect, see `canonical_repo`)."""
        url = f"{self.api.endpoint}/api/kernels/{repo}/refs"

        def fetch(deadline: float) -> tuple[dict, str]:
            response = self._api_get(repo, url, deadline)
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

        Not `HfApi.list_repo_tree`: its requests have no deadline or size cap and retry on
        their own; here one retry policy and one set of bounds apply to every page.
        """
        items: list = []
        next_url: str | None = url
        first = True
        while next_url:
            def page(deadline: float, u: str = next_url, p: dict[str, str] | None = params if first else None):
                response = self._api_get(repo, u, deadline, p)
                data = response.json()
                if not isinstance(data, list):
                    raise HubError(f"{repo}: the Hub answered {redact(u)} with unexpected JSON")
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

    def fetch(self, repo: str, commit: str, path: str, blob_id: str, size: int) -> bytes:
        """Download one small file (at most its listed `size` bytes) and check it against its git blob id."""
        from huggingface_hub import hf_hub_url

        url = hf_hub_url(repo, path, repo_type="kernel", revision=commit, endpoint=self.api.endpoint)

        def fetch(deadline: float) -> bytes:
            data = self._request(url, deadline, timeout=download_timeout(), limit=size, follow=True).content
            if git_blob_id(data) != blob_id:
                raise ConnectionError(f"{path}: the downloaded bytes do not match the Hub's blob id")
            return data

        return self._call(repo, fetch)

    def file_metadata(self, repo: str, commit: str, path: str, deadline: float) -> RemoteFile:
        """What the Hub says of one file at `commit`, by huggingface_hub's `get_hf_file_metadata`.

        A HEAD that reads `X-Linked-Etag`/`X-Linked-Size` on the Hub's redirect without
        following it to the CDN, so the ETag is the one `hf_hub_download` names its blob by.
        """
        from huggingface_hub import get_hf_file_metadata, hf_hub_url

        url = hf_hub_url(repo, path, repo_type="kernel", revision=commit, endpoint=self.api.endpoint)

        def fetch(deadline: float) -> RemoteFile:
            meta = get_hf_file_metadata(url, token=self.api.token, library_name="kernlock",
                                        timeout=min(etag_timeout(), max(0.1, deadline - time.monotonic())))
            if meta.commit_hash not in (None, commit):
                raise _Stop(f"the Hub answered for {path} at commit {meta.commit_hash}, not the locked {commit}")
            if not meta.etag or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", meta.etag):
                raise _Stop(f"the Hub answered for {path} without a usable ETag ({meta.etag!r})")
            return RemoteFile(url=url, etag=meta.etag, size=meta.size, location=meta.location)

        return self._call(repo, fetch, deadline)

    def download_to(self, repo: str, remote: RemoteFile, size: int, destination: Path, deadline: float) -> None:
        """Stream `remote` into `destination` (rewritten on every attempt), at most `size` bytes, by `deadline`."""
        headers = self._headers()
        if urlsplit(remote.location).netloc != urlsplit(remote.url).netloc:
            headers.pop("authorization", None)  # a signed CDN URL: no token, as huggingface_hub does

        def fetch(deadline: float) -> None:
            with open(destination, "wb") as out:
                self._request(remote.location, deadline, timeout=download_timeout(), limit=size, sink=out.write,
                              follow=True, headers=headers)
                if out.tell() != size:
                    raise ConnectionError(f"{remote.url}: received {out.tell()} of {size} bytes")

        self._call(repo, fetch, deadline)

    def publisher_trusted(self, org: str) -> bool:
        """Whether the Hub marks `org` as a trusted kernel publisher (asked once per org, even by parallel callers)."""
        with self._lock:
            org_lock = self._org_locks.setdefault(org, threading.Lock())
        with org_lock:
            return self._publisher_trusted(org)

    def _publisher_trusted(self, org: str) -> bool:
        with self._lock:
            if org in self._org_trust:
                return self._org_trust[org]

        def fetch(deadline: float) -> bool:
            response = self._api_get(org, f"{self.api.endpoint}/api/organizations/{org}/overview", deadline)
            overview = response.json()
            if not isinstance(overview, dict):
                raise HubError(f"{org}: the Hub answered the organization overview with unexpected JSON")
            return bool(overview.get("trustedKernelPublisher", False))

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
