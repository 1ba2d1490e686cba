"""The Hub, as kernlock needs it: refs, trees with hashes, files, publisher trust.

A thin layer over huggingface_hub (its `HfApi` endpoint and token, `get_hf_file_metadata`)
on `kernlock._internal.hub.transport`, which bounds, retries and describes every request; memoised
and thread-safe, so one `Hub` serves a whole resolution.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

from kernlock._internal.hub.responses import Ref, RemoteFile, TreeFile, git_blob_id
from kernlock._internal.hub.resumable_download import Partial, download_to
from kernlock._internal.hub.transport import (
    CHECK_ENDPOINT,
    Stop,
    Transport,
    download_timeout,
    etag_timeout,
    http_status,
)
from kernlock._internal.spec.cooldown import parse_date
from kernlock._internal.spec.ids import is_git_sha, is_sha256
from kernlock.errors import HubError, redact

T = TypeVar("T")

# entries of one paginated listing: a kernel repo's build/ tree or history is far smaller
MAX_LISTING = 20_000
# pages of one listing: MAX_LISTING entries at 20 a page (the Hub sends 50 or more)
MAX_PAGES = 1_000
# pages in a row with no entry that still link to another: the Hub never sends one
MAX_EMPTY_PAGES = 3
# bytes of a file stored in git, not LFS (the Hub refuses git files over 10 MB)
MAX_GIT_FILE = 16 << 20


class Hub:
    """Hub access for one resolution: memoised, retried, thread-safe."""

    def __init__(
        self,
        endpoint: str | None = None,
        token: str | bool | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        from huggingface_hub import constants

        # huggingface_hub's endpoint and token, as `HfApi` takes them; `HfApi` itself (a slow
        # import: a quarter of
        # `kernlock lock`'s start-up) only for the one call that needs it, `_not_a_kernel`
        self.endpoint = endpoint if endpoint is not None else constants.ENDPOINT
        self.token = token
        self.transport = Transport(token, sleep)
        self._lock = threading.Lock()
        self._org_trust: dict[str, bool] = {}
        self._org_locks: dict[str, threading.Lock] = {}
        self._canonical: dict[str, str] = {}
        self._histories: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
        self._trees: dict[tuple[str, str, str], list[TreeFile]] = {}

    def _call(self, repo: str, fn: Callable[[float], T], deadline: float | None = None) -> T:
        """`Transport.call`, naming a model repo given as a kernel instead of "repository not
        found"."""
        try:
            return self.transport.call(repo, fn, deadline)
        except HubError as error:
            if not self._not_a_kernel(repo, error.__cause__):
                raise
            raise HubError(
                f"{repo} is a model repository, not a kernel repository",
                fix="name the kernel repo to load instead (e.g. kernels-community/flash-attn2)",
            ) from error.__cause__

    def _not_a_kernel(self, repo: str, error: BaseException | None) -> bool:
        """Whether the Hub has no kernel repo `repo` but a model repo of that name.

        The Hub answers 404 for the kernel endpoints of a model repo; `/api/models/<repo>` tells
        them apart.
        """
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

        if not isinstance(error, RepositoryNotFoundError):
            return False
        from huggingface_hub import HfApi

        try:
            HfApi(endpoint=self.endpoint, token=self.token, library_name="kernlock").model_info(
                repo, timeout=etag_timeout()
            )
        except GatedRepoError:
            pass
        except Exception:
            return False
        return True

    def refs(self, repo: str) -> list[Ref]:
        """Branches and tags of a kernel repo (following a rename redirect, see
        `canonical_repo`)."""
        url = f"{self.endpoint}/api/kernels/{repo}/refs"

        def fetch(deadline: float) -> tuple[dict, str]:
            response = self.transport.api_get(repo, url, deadline)
            return response.json(), urlsplit(str(response.url)).path

        data, final_path = self._call(repo, fetch)
        prefix = "/api/kernels/"
        if final_path.startswith(prefix) and final_path.endswith("/refs"):
            canonical = final_path[len(prefix) : -len("/refs")]
            with self._lock:
                self._canonical[repo] = canonical
        refs: list[Ref] = []
        try:
            for kind, key in (("branch", "branches"), ("tag", "tags")):
                refs.extend(
                    Ref(str(item["name"]), kind, item["targetCommit"])
                    for item in data.get(key) or []
                )
        except (AttributeError, KeyError, TypeError):
            raise HubError(
                f"{repo}: the Hub answered the refs request with unexpected JSON",
                fix=CHECK_ENDPOINT,
            ) from None
        for ref in refs:
            if not isinstance(ref.commit, str) or not is_git_sha(ref.commit):
                raise HubError(
                    f"{repo}: the Hub reported {ref.kind} {ref.name!r} at {ref.commit!r}, which is "
                    "not a commit SHA",
                    fix=CHECK_ENDPOINT,
                )
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
        from kernlock._internal.hub.transport import hub_deadline

        items: list = []
        next_url: str | None = url
        first = True
        seen: set[str] = set()
        empty = 0
        limit = hub_deadline()
        # the listing as a whole, however many pages: one request's deadline
        deadline = time.monotonic() + limit
        while next_url:
            if next_url in seen:
                raise HubError(
                    f"{repo}: the Hub's listing {redact(url)} links back to a page it already sent "
                    f"({redact(next_url)})",
                    fix=CHECK_ENDPOINT,
                )
            if len(seen) >= MAX_PAGES or empty > MAX_EMPTY_PAGES:
                why = (
                    f"{len(seen)} pages"
                    if len(seen) >= MAX_PAGES
                    else f"{empty} empty pages in a row"
                )
                raise HubError(
                    f"{repo}: the Hub's listing {redact(url)} did not end after {why}, each "
                    "linking to another; a kernel repo's listing is far shorter",
                    fix="check HF_ENDPOINT (a proxy or mirror may be inventing pages)",
                )
            if time.monotonic() >= deadline:
                raise HubError(
                    f"{repo}: the Hub's listing {redact(url)} did not end within {limit:g} s "
                    f"({len(seen)} pages)",
                    fix="check HF_ENDPOINT, or raise $KERNLOCK_HUB_DEADLINE",
                )
            seen.add(next_url)

            def page(
                deadline: float,
                u: str = next_url,
                p: dict[str, str] | None = params if first else None,
            ):
                response = self.transport.api_get(repo, u, deadline, p)
                data = response.json()
                if not isinstance(data, list):
                    raise HubError(
                        f"{repo}: the Hub answered {redact(u)} with unexpected JSON",
                        fix=CHECK_ENDPOINT,
                    )
                return data, response.links.get("next", {}).get("url")

            data, next_url = self._call(repo, page, deadline)
            items.extend(data)
            empty = 0 if data else empty + 1
            if len(items) > MAX_LISTING:
                raise HubError(
                    f"{repo}: the Hub's listing {redact(url)} has more than {MAX_LISTING} entries, "
                    "more than kernlock accepts from one kernel repo",
                    fix=CHECK_ENDPOINT,
                )
            first = False
        return items

    def commits(self, repo: str, revision: str) -> list[str]:
        """Commit SHAs reachable from `revision`, newest first."""
        return [commit for commit, _ in self.dated_commits(repo, revision)]

    def dated_commits(self, repo: str, revision: str) -> list[tuple[str, str | None]]:
        """Commits reachable from `revision`, newest first, each with the date the Hub gives it
        (`list_repo_commits`' `date`; None where it gives none that parses); one listing per repo
        and revision."""
        from urllib.parse import quote

        key = (repo, revision)
        with self._lock:
            if key in self._histories:
                return self._histories[key]
        url = f"{self.endpoint}/api/kernels/{repo}/commits/{quote(revision, safe='')}"
        history = [
            (str(item.get("id", "")), _valid_date(item.get("date")))
            for item in self._get_pages(repo, url, {})
            if isinstance(item, dict)
        ]
        with self._lock:
            return self._histories.setdefault(key, history)

    def tree(self, repo: str, commit: str, path: str = "build") -> list[TreeFile]:
        """Every file under `path` at `commit`, with sizes, blob ids and LFS hashes (listed once
        per commit: a commit's tree never changes)."""
        key = (repo, commit, path)
        with self._lock:
            if key in self._trees:
                return self._trees[key]
        files = self._list_tree(repo, commit, path)
        if not is_git_sha(commit):
            return files
        with self._lock:
            return self._trees.setdefault(key, files)

    def _list_tree(self, repo: str, commit: str, path: str) -> list[TreeFile]:
        url = f"{self.endpoint}/api/kernels/{repo}/tree/{commit}/{path}"
        files = []
        seen: set[str] = set()
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
                raise HubError(
                    f"{repo}: the Hub listed a malformed tree entry at {commit[:12]}",
                    fix=CHECK_ENDPOINT,
                ) from None
            if (
                item.size < 0
                or not is_git_sha(item.blob_id)
                or (item.lfs_sha256 is not None and not is_sha256(item.lfs_sha256))
            ):
                raise HubError(
                    f"{repo}: the Hub listed {item.path!r} at {commit[:12]} with an invalid size "
                    "or hash",
                    fix=CHECK_ENDPOINT,
                )
            # else the lock model refuses the entry as a hand edit of the lock
            if item.path in seen:
                raise HubError(
                    f"{repo}: the Hub listed {item.path!r} at {commit[:12]} more than once",
                    fix="check HF_ENDPOINT (a proxy or mirror may be repeating pages)",
                )
            seen.add(item.path)
            files.append(item)
        return files

    def fetch(self, repo: str, commit: str, path: str, blob_id: str, size: int) -> bytes:
        """Download one small file (at most its listed `size` bytes) and check it against its git
        blob id."""
        from huggingface_hub import hf_hub_url

        url = hf_hub_url(repo, path, repo_type="kernel", revision=commit, endpoint=self.endpoint)
        if size > MAX_GIT_FILE:
            raise HubError(
                f"{repo}: the Hub lists {path} at {commit[:12]} as a {size}-byte file stored in "
                f"git (not LFS); kernlock reads at most {MAX_GIT_FILE} bytes of such a file (the "
                "Hub stores larger ones in LFS)",
                fix=CHECK_ENDPOINT,
            )

        def fetch(deadline: float) -> bytes:
            data = self.transport.request(
                url, deadline, timeout=download_timeout(), limit=size, follow=True
            ).content
            if git_blob_id(data) != blob_id:
                raise ConnectionError(
                    f"{path}: the downloaded bytes do not match the Hub's blob id"
                )
            return data

        return self._call(repo, fetch)

    def file_metadata(self, repo: str, commit: str, path: str, deadline: float) -> RemoteFile:
        """What the Hub says of one file at `commit`, by huggingface_hub's `get_hf_file_metadata`.

        A HEAD that reads `X-Linked-Etag`/`X-Linked-Size` on the Hub's redirect without
        following it to the CDN, so the ETag is the one `hf_hub_download` names its blob by.
        """
        from huggingface_hub import get_hf_file_metadata, hf_hub_url

        url = hf_hub_url(repo, path, repo_type="kernel", revision=commit, endpoint=self.endpoint)

        def fetch(deadline: float) -> RemoteFile:
            meta = get_hf_file_metadata(
                url,
                token=self.token,
                library_name="kernlock",
                timeout=min(etag_timeout(), max(0.1, deadline - time.monotonic())),
            )
            if meta.commit_hash not in (None, commit):
                raise Stop(
                    f"the Hub answered for {path} at commit {meta.commit_hash}, not the locked "
                    f"{commit}"
                )
            if not meta.etag or not (is_git_sha(meta.etag) or is_sha256(meta.etag)):
                raise Stop(f"the Hub answered for {path} without a usable ETag ({meta.etag!r})")
            return RemoteFile(url=url, etag=meta.etag, size=meta.size, location=meta.location)

        return self._call(repo, fetch, deadline)

    def download_to(
        self, repo: str, remote: RemoteFile, size: int, partial: Partial, deadline: float
    ) -> tuple[int, str]:
        """Stream `remote` into the open `partial`, at most `size` bytes, by `deadline`; return the
        bytes resumed and the sha256 of the whole file (see `resumable_download`)."""
        return download_to(self.transport, self._call, repo, remote, size, partial, deadline)

    def publisher_trusted(self, org: str) -> bool:
        """Whether the Hub marks `org` as a trusted kernel publisher (asked once per org, even by
        parallel callers)."""
        with self._lock:
            org_lock = self._org_locks.setdefault(org, threading.Lock())
        with org_lock:
            return self._publisher_trusted(org)

    def _publisher_trusted(self, org: str) -> bool:
        with self._lock:
            if org in self._org_trust:
                return self._org_trust[org]

        def fetch(deadline: float) -> bool:
            response = self.transport.api_get(
                org, f"{self.endpoint}/api/organizations/{org}/overview", deadline
            )
            overview = response.json()
            if not isinstance(overview, dict):
                raise HubError(
                    f"{org}: the Hub answered the organization overview with unexpected JSON",
                    fix=CHECK_ENDPOINT,
                )
            return bool(overview.get("trustedKernelPublisher", False))

        try:
            trusted = self._call(org, fetch)
        except HubError as error:
            if http_status(error.__cause__) == 404:
                trusted = False
            else:
                raise
        with self._lock:
            self._org_trust[org] = trusted
        return trusted

    def org_kernels(self, org: str) -> list[str]:
        """The kernel repos the Hub lists for `org` (`/api/kernels?author=org`, as it lists models),
        for a did-you-mean only: empty where the Hub lists none or cannot answer."""

        def fetch(deadline: float) -> list[str]:
            url = f"{self.endpoint}/api/kernels"
            listed = self.transport.api_get(org, url, deadline, params={"author": org}).json()
            return [i["id"] for i in listed if isinstance(i, dict) and isinstance(i.get("id"), str)]

        try:
            return self._call(org, fetch)
        except (HubError, TypeError, ValueError):
            return []


def _valid_date(value: object) -> str | None:
    """A commit's `date` as the Hub gave it, when it is an RFC 3339 timestamp."""
    if not isinstance(value, str):
        return None
    try:
        parse_date(value)
    except ValueError:
        return None
    return value
