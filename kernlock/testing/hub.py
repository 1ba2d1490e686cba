"""A Hugging Face Hub-compatible HTTP server for kernel repos, backed by real git repositories.

It implements the subset of the Hub API that ``huggingface_hub`` and ``kernels``
use for ``repo_type="kernel"``:

- ``GET  /api/kernels/{repo}/refs``                      branches and tags
- ``GET  /api/kernels/{repo}/tree/{rev}[/{path}]``       ``recursive`` and ``expand``, paginated
  (``Link: rel="next"``)
- ``GET  /api/kernels/{repo}[/revision/{rev}]``          repo info (no ``siblings``, as on the real
  Hub)
- ``POST /api/kernels/{repo}/paths-info/{rev}``          form or JSON body with ``paths`` and
  ``expand``
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
- the CDN honours ``Range`` and ``If-Range`` (against its ``ETag``; change ``cdn_etag_salt``
  to change it); ``ranges`` logs both headers of every request, ``cdn_bytes_sent`` the CDN's body
  bytes.
- faults (``add_fault``), among them ``stall`` (accept, never answer), ``slowloris``
  (headers, then a byte now and then), ``drip-headers`` (header lines a byte now and
  then, never ending) and ``endless`` (a body that never ends).
  ``fired`` counts, per kind, the faults that actually hit a request.

This module holds the server's state (`TestHub`); the Hub's answers, one method
per endpoint, are `kernlock.testing.endpoints`, so the served API reads in one
place; the git repositories behind it are read by `kernlock.testing.git_repo`, and
requests are routed, delayed and faulted by `kernlock.testing.handler`.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import signal
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kernlock._internal.rules.signatures import TRUSTED_ROOT_ENV
from kernlock.testing.endpoints import HubEndpoints
from kernlock.testing.fixtures import default_fixtures_dir, ensure_fixture_repos
from kernlock.testing.git_repo import GitRepo
from kernlock.testing.handler import FAULT_KINDS, Fault, Handler
from kernlock.testing.sigstore import TestSigstore

RATE_LIMITS = {"api": 500, "resolvers": 3000}  # the Hub's anonymous quotas per window
RATE_WINDOW = 300.0  # seconds; the Hub counts in fixed 5-minute windows
TREE_PAGE_SIZE = 1000
# seconds between the serving loop's checks for stop() (the standard 0.5 makes each stop slow)
_POLL_INTERVAL = 0.02


class TestHub(HubEndpoints):
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
        copy_on_change: Path | None = None,
    ) -> None:
        # With copy_on_change, the repos given are never changed (repo_path() hands out copies):
        # read their refs once.
        self.repos = {
            repo_id: GitRepo(Path(path), immutable=copy_on_change is not None)
            for repo_id, path in repos.items()
        }
        self._copy_on_change = copy_on_change  # where repo_path() puts private copies
        # model repo ids: answered on /api/models/, not as kernels (as the Hub does)
        self.models = set(models)
        # old repo id -> new: answered with a 307, as the Hub does
        self.renames = dict(renames or {})
        self.trusted_orgs = set(trusted_orgs)
        self.latency = latency
        self.cdn_redirect = True
        self.xet = True
        self.tree_page_size = TREE_PAGE_SIZE
        self.rate_limits: dict[str, int] | None = dict(RATE_LIMITS)
        self.rate_window = RATE_WINDOW
        self.fired: collections.Counter[str] = collections.Counter()
        self.first_fired: dict[
            str, float
        ] = {}  # fault kind -> time.monotonic() it first hit a request
        self.cdn_url = ""
        self._cdn_blobs: dict[str, bytes] = {}
        self._windows: dict[str, tuple[float, int]] = {}  # bucket -> (window start, requests in it)
        self._stopping = threading.Event()
        self.requests: collections.Counter[str] = collections.Counter()
        self.log: list[tuple[str, str]] = []
        self.ranges: list[
            tuple[str, str | None, str | None]
        ] = []  # (path, Range, If-Range) of every request
        self.cdn_bytes_sent = 0  # body bytes the CDN sent
        # the CDN's body bytes, by path
        self.bytes_by_path: collections.Counter[str] = collections.Counter()
        self.cdn_pace = 0.0  # seconds the CDN waits after each KiB of a body (0: no pacing)
        # change it to change the CDN's ETag (a re-uploaded object): If-Range fails
        self.cdn_etag_salt = b""
        self.authorizations: list[str | None] = []
        self.bytes_sent = 0
        self.url = ""
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._cdn: ThreadingHTTPServer | None = None

    def start(self, port: int = 0) -> TestHub:
        """Start serving on 127.0.0.1:``port`` (0: a free port), and the CDN on another port and
        host name.

        The CDN is named ``localhost``: like the real Hub's CDN it is another host, so a
        client that follows same-host redirects (huggingface_hub 1.x) stops at the Hub's answer.
        """
        self._stopping.clear()
        self._server = self._serve(port, cdn=False)
        self._cdn = self._serve(0, cdn=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.cdn_url = f"http://localhost:{self._cdn.server_address[1]}"
        return self

    def _serve(self, port: int, cdn: bool) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(
            ("127.0.0.1", port), type("Handler", (Handler,), {"hub": self, "cdn": cdn})
        )
        server.daemon_threads = True
        # A short poll keeps stop() quick: shutdown() waits for the serving loop's next poll.
        threading.Thread(
            target=server.serve_forever,
            args=(_POLL_INTERVAL,),
            name="TestHub-CDN" if cdn else "TestHub",
            daemon=True,
        ).start()
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
        """The git repository served as ``repo_id``, for a test to read or change.

        With ``copy_on_change``, the repos given are shared templates: the first call copies
        ``repo_id`` there and serves the copy from then on, so only the repos a test touches are
        copied.
        """
        with self._lock:
            repo = self.repos[repo_id]
            # immutable only with copy_on_change
            if repo.immutable and self._copy_on_change is not None:
                copy = shutil.copytree(repo.path, self._copy_on_change / repo.path.name)
                self.repos[repo_id] = repo = GitRepo(Path(copy))
            return repo.path

    def reset_counts(self) -> None:
        """Forget request counts, the request log and ``bytes_sent``."""
        with self._lock:
            self.requests.clear()
            self.log.clear()
            self.ranges.clear()
            self.cdn_bytes_sent = 0
            self.bytes_by_path.clear()
            self.authorizations.clear()
            self.fired.clear()
            self.first_fired.clear()
            self.bytes_sent = 0

    def add_fault(
        self,
        kind: str,
        *,
        match: str = "",
        times: int = 1,
        method: str | None = None,
        **params: Any,
    ) -> None:
        """Inject a failure into the next ``times`` requests whose path matches regex ``match``
        (and whose HTTP method is ``method``, if given).

        Kinds: ``status`` (``code`` = 500, optional ``retry_after``), ``reset`` (connection reset
        mid-body, after ``after`` bytes = half), ``truncate`` (fewer bytes than ``Content-Length``,
        ``after`` of them, then close), ``corrupt``
        (bytes of the body flipped), ``delay`` (sleep ``seconds`` = 1.0 before answering),
        ``respond`` (answer with ``body`` — bytes, str or JSON-able — ``status`` = 200 and
        optional ``headers`` instead: a hostile or broken Hub), ``stall`` (read the request,
        never answer), ``slowloris`` (headers, then one byte every ``interval`` = 0.2 s),
        ``drip-headers`` (the status line, then header bytes one every ``interval``, for
        ``seconds`` or never ending), ``endless`` (the headers without ``Content-Length``, then a
        body that never ends), ``pages`` (a listing page of ``body`` = ``[]`` linking to a fresh
        next page: pagination that never ends). The last four hold the connection until the client
        leaves or the Hub stops.
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"Unknown fault kind {kind!r}, expected one of {FAULT_KINDS}")
        with self._lock:
            self._faults.append(Fault(kind, match, times, method, params))

    def _record(
        self,
        method: str,
        path: str,
        kind: str,
        authorization: str | None = None,
        range_header: str | None = None,
        if_range: str | None = None,
    ) -> Fault | None:
        """Count a request (and the Authorization, Range and If-Range headers it carried) and take
        the first matching fault."""
        with self._lock:
            self.requests[kind] += 1
            self.log.append((method, path))
            self.ranges.append((path, range_header, if_range))
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
        """The RateLimit headers for a request of ``kind``, and whether it is over the quota (a
        429)."""
        bucket = (
            "resolvers"
            if kind == "resolve"
            else "api"
            if kind not in ("cdn", "agent-registry")
            else None
        )
        if self.rate_limits is None or bucket not in self.rate_limits:
            return {}, False
        quota, window = self.rate_limits[bucket], self.rate_window
        now = time.time()
        with self._lock:
            anchor = self._windows.get(bucket, (now, 0))[
                0
            ]  # windows follow on from the bucket's first request
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
                    return prefix + new + path[len(prefix) + len(old) :]
        return None

    def _count_bytes(self, n: int, kind: str = "", path: str = "") -> None:
        with self._lock:
            self.bytes_sent += n
            if kind == "cdn":
                self.cdn_bytes_sent += n
                self.bytes_by_path[path] += n


def main(argv: list[str] | None = None) -> None:
    """Build the fixture repos into ``--workdir`` (if absent) and serve them until killed."""
    parser = argparse.ArgumentParser(
        prog="python -m kernlock.testing.hub",
        description="Serve the bundled fixture kernel repos as a Hugging Face Hub on 127.0.0.1 "
        "until killed, building them into --workdir on the first run. Once it listens it prints "
        "the variables to export, one NAME=VALUE line each, for kernlock, kernels and "
        f"huggingface_hub to use it: HF_ENDPOINT, HF_HUB_DISABLE_XET and {TRUSTED_ROOT_ENV}.",
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free port)")
    parser.add_argument(
        "--workdir", type=Path, required=True, help="directory holding the git repos"
    )
    parser.add_argument(
        "--fixtures", type=Path, default=default_fixtures_dir(), help="fixture TOML directory"
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds to sleep before each response"
    )
    args = parser.parse_args(argv)

    repos = ensure_fixture_repos(args.fixtures, args.workdir)
    trusted_root = TestSigstore().write_trusted_root(args.workdir / "sigstore-trusted-root.json")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with TestHub(repos, latency=args.latency).start(args.port) as hub:
        # No Xet server here (plain HTTP); the fixtures' bundles verify against the test Sigstore's
        # root.
        print(
            f"HF_ENDPOINT={hub.url}\nHF_HUB_DISABLE_XET=1\n{TRUSTED_ROOT_ENV}={trusted_root}",
            flush=True,
        )
        while not stop.wait(1.0):
            pass


if __name__ == "__main__":
    main()
