"""The Hub's answers, one method per endpoint of the Hub API the test Hub serves
(`kernlock.testing.hub`): refs, tree, paths-info, repo info, resolve, the CDN, commits, models and
an organisation's overview."""

from __future__ import annotations

import hashlib
import threading

from kernlock.testing.fixtures import git
from kernlock.testing.git_repo import GitRepo, iso_time
from kernlock.testing.handler import HubError, Response, json_response, ranged


class HubEndpoints:
    """`TestHub`'s endpoints, over the state `TestHub` keeps (declared here for the type
    checker)."""

    repos: dict[str, GitRepo]
    models: set[str]
    trusted_orgs: set[str]
    cdn_redirect: bool
    xet: bool
    tree_page_size: int
    cdn_url: str
    cdn_etag_salt: bytes
    url: str
    _cdn_blobs: dict[str, bytes]
    _lock: threading.Lock

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

        return json_response(
            {
                "branches": section("refs/heads/"),
                "converts": section("refs/convert/"),
                "tags": section("refs/tags/"),
                "pullRequests": section("refs/pr/"),
            }
        )

    def tree(
        self,
        repo_id: str,
        rev: str,
        path: str,
        recursive: bool,
        expand: bool,
        cursor: str | None = None,
        page_url: str = "",
    ) -> Response:
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
        response = json_response([e.to_json(last.get(e.path), self.xet) for e in page])
        if start + size < len(selected):
            separator = "&" if "?" in page_url else "?"
            response.headers["Link"] = (
                f'<{self.url}{page_url}{separator}cursor={start + size}>; rel="next"'
            )
        return response

    def paths_info(self, repo_id: str, rev: str, paths: list[str], expand: bool) -> Response:
        repo = self._repo(repo_id)
        commit = self._commit(repo, rev)
        entries = repo.entries(commit)
        last = repo.last_commits(commit) if expand else {}
        found = [entries[p.strip("/")] for p in paths if p.strip("/") in entries and p.strip("/")]
        return json_response([e.to_json(last.get(e.path), self.xet) for e in found])

    def repo_info(self, repo_id: str, rev: str) -> Response:
        """A kernel repo's info. Like the real Hub, it lists no ``siblings``: clients list the tree
        instead."""
        repo = self._repo(repo_id)
        commit = self._commit(repo, rev)
        timestamp, _ = repo.commit_info(commit)
        org = repo_id.split("/")[0]
        return json_response(
            {
                "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
                "id": repo_id,
                "author": org,
                "sha": commit,
                "lastModified": iso_time(timestamp),
                "private": False,
                "gated": False,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "tags": ["kernel"],
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
                location = (
                    f"{self.cdn_url}/cdn/{entry.lfs['oid']}/"
                    f"{path.rsplit('/', 1)[-1]}?Expires=9999999999"
                )
                text = f"Found. Redirecting to {location}".encode()
                return Response(
                    302,
                    text,
                    {
                        "Content-Type": "text/plain; charset=utf-8",
                        "Location": location,
                        "X-Repo-Commit": commit,
                        "X-Linked-Etag": headers["X-Linked-Etag"],
                        "X-Linked-Size": headers["X-Linked-Size"],
                        "ETag": f'W/"{hashlib.sha1(text).hexdigest()[:27]}"',
                    },
                )
        return ranged(content, headers, range_header)

    def cdn(self, sha256: str, range_header: str | None, if_range: str | None = None) -> Response:
        """The CDN's answer for a blob: the bytes, with the CDN's own (different) ETag and no Hub
        headers."""
        with self._lock:
            content = self._cdn_blobs.get(sha256)
        if content is None:
            return Response(
                403,
                b"<Error><Code>AccessDenied</Code></Error>",
                {"Content-Type": "application/xml"},
            )
        headers = {
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            "ETag": f'"{hashlib.sha256(b"cdn" + self.cdn_etag_salt + content).hexdigest()}"',
            "Cache-Control": "public, max-age=604800, immutable",
        }
        return ranged(content, headers, range_header, if_range)

    def commits(self, repo_id: str, rev: str) -> Response:
        """Commits reachable from ``rev``, newest first (``list_repo_commits``)."""
        repo = self._repo(repo_id)
        commit = self._commit(repo, rev)
        out = git(repo.path, "log", "--format=%H%x09%ct%x09%s", commit).decode()
        items = []
        for line in out.splitlines():
            sha, timestamp, title = line.split("\t", 2)
            items.append(
                {
                    "id": sha,
                    "title": title,
                    "message": "",
                    "date": iso_time(int(timestamp)),
                    "authors": [{"user": "fixture"}],
                }
            )
        return json_response(items)

    def model_info(self, repo_id: str) -> Response:
        if repo_id not in self.models:
            raise HubError(404, "RepoNotFound", "Repository not found")
        return json_response(
            {
                "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
                "id": repo_id,
                "modelId": repo_id,
                "author": repo_id.split("/")[0],
                "private": False,
                "gated": False,
                "disabled": False,
                "tags": [],
                "siblings": [],
            }
        )

    def list_kernels(self, author: str) -> Response:
        """`/api/kernels?author=ORG`: the org's kernel repos, listed as the Hub lists models."""
        return json_response([{"id": r} for r in sorted(self.repos) if r.split("/")[0] == author])

    def overview(self, org: str) -> Response:
        if org not in self.trusted_orgs and not any(r.split("/")[0] == org for r in self.repos):
            return json_response({"error": "Organization not found"}, 404)
        return json_response(
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
