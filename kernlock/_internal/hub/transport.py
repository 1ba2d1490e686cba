"""Bounded, retried HTTP to the Hub: the one place with timeouts, deadlines, retries and waits.

Every request is bounded by connect/read timeouts (`HF_HUB_ETAG_TIMEOUT`,
`HF_HUB_DOWNLOAD_TIMEOUT`), an overall deadline with retries and waits included
(`KERNLOCK_HUB_DEADLINE`) and a cap on the bytes read; rate-limit waits are
bounded by `KERNLOCK_RATE_LIMIT_WAIT` and announced in one line; redirects to
another host are never taken for a repo rename. Every failure becomes a one-line
`HubError` naming the repo (`describe`). `kernlock._internal.hub.client` builds the Hub's API on it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urljoin, urlsplit

from kernlock._internal.settings import DEADLINE_ENV, RATE_LIMIT_WAIT_ENV, seconds
from kernlock.errors import HubError, KernlockError, redact

if TYPE_CHECKING:
    import httpx2

T = TypeVar("T")

RETRY_STATUS = (429, 500, 502, 503, 504)
MAX_ATTEMPTS = 4
BASE_DELAY = 0.2
MAX_REDIRECTS = 5
API_BODY_LIMIT = 64 << 20  # bytes: a JSON answer larger than this is not a Hub answer
ERROR_BODY_LIMIT = 64 << 10
DEFAULT_DEADLINE = 600.0
DEFAULT_RATE_LIMIT_WAIT = 300.0

logger = logging.getLogger("kernlock")


def etag_timeout() -> float:
    """Connect/read timeout of API calls and metadata requests (`HF_HUB_ETAG_TIMEOUT`, as
    huggingface_hub)."""
    from huggingface_hub import constants

    return seconds("HF_HUB_ETAG_TIMEOUT", constants.HF_HUB_ETAG_TIMEOUT)


def download_timeout() -> float:
    """Connect/read timeout of file downloads (`HF_HUB_DOWNLOAD_TIMEOUT`, as huggingface_hub)."""
    from huggingface_hub import constants

    return seconds("HF_HUB_DOWNLOAD_TIMEOUT", constants.HF_HUB_DOWNLOAD_TIMEOUT)


def hub_deadline() -> float:
    """Seconds one Hub request or file download may take in all (`KERNLOCK_HUB_DEADLINE`)."""
    return seconds(DEADLINE_ENV, DEFAULT_DEADLINE)


# .deadline: time.monotonic() by which this thread's current Hub call must end
_scope = threading.local()


def current_deadline() -> float | None:
    """The deadline this thread's Hub calls end by, if one is set (to carry into worker threads)."""
    return getattr(_scope, "deadline", None)


@contextmanager
def overall_deadline(deadline: float | None) -> Iterator[None]:
    """Every Hub call of this thread inside ends by `deadline` (None: no change): a whole check
    bounded as one request, however many calls it makes."""
    outer = getattr(_scope, "deadline", None)
    _scope.deadline = (
        outer if deadline is None else deadline if outer is None else min(outer, deadline)
    )
    try:
        yield
    finally:
        _scope.deadline = outer


def _bounded(timeout: float | None) -> float | None:
    """`timeout`, cut to what is left of this thread's deadline: connect, headers and body all end
    by it."""
    deadline = getattr(_scope, "deadline", None)
    if deadline is None:
        return timeout
    left = max(deadline - time.monotonic(), 0.001)
    return left if timeout is None else min(timeout, left)


class _DeadlineStream:
    """A connection's network stream whose every read and write ends by the current call's deadline.

    A per-read timeout alone never trips on a server that sends a byte now and
    then, in the headers as in the body.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout))

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> Any:
        return _DeadlineStream(
            self._inner.start_tls(ssl_context, server_hostname, _bounded(timeout))
        )

    def __getattr__(self, name: str) -> Any:  # close, get_extra_info
        return getattr(self._inner, name)


class _DeadlineBackend:
    """The HTTP library's network backend, making streams that honour the deadline."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, **kwargs: Any
    ) -> _DeadlineStream:
        return _DeadlineStream(self._inner.connect_tcp(host, port, _bounded(timeout), **kwargs))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, **kwargs: Any
    ) -> _DeadlineStream:
        return _DeadlineStream(self._inner.connect_unix_socket(path, _bounded(timeout), **kwargs))

    def __getattr__(self, name: str) -> Any:  # sleep
        return getattr(self._inner, name)


def _bound_session(session: Any) -> None:
    """Make the connections huggingface_hub's session opens from now on honour the deadline.

    The session is huggingface_hub's (httpx2, or httpx on 1.x), shared with it: only
    its connection pools' network backend is wrapped, and only a thread inside
    `Transport.call` has a deadline. Connections it opened before keep per-read timeouts.
    """
    for transport in (
        getattr(session, "_transport", None),
        *getattr(session, "_mounts", {}).values(),
    ):
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if pool is not None and backend is not None and not isinstance(backend, _DeadlineBackend):
            pool._network_backend = _DeadlineBackend(backend)


def http_status(error: BaseException | None) -> int | None:
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
    return isinstance(error, _transport_errors()) or http_status(error) in RETRY_STATUS


CHECK_ENDPOINT = "check HF_ENDPOINT (it must name the Hugging Face Hub or a faithful mirror of it)"
"""The fix of a Hub answer no Hub gives: the endpoint, a proxy or a mirror is answering instead."""


def describe(error: BaseException, repo: str) -> tuple[str, str]:
    """A Hub failure for `repo`: the problem in one line, and its fix."""
    from huggingface_hub.errors import (
        GatedRepoError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    status = http_status(error)
    if isinstance(error, GatedRepoError) or status in (401, 403):
        return (
            f"{repo}: access denied (HTTP {status}); the repo is gated or private",
            "log in with `hf auth login` or set HF_TOKEN to a token with access",
        )
    if isinstance(error, RepositoryNotFoundError):
        return (
            f"{repo}: repository not found on the Hub",
            "check the spelling (or authenticate if it is private)",
        )
    if isinstance(error, RevisionNotFoundError):
        return (
            f"{repo}: revision not found on the Hub",
            "check the revision; the publisher may have deleted it",
        )
    if isinstance(error, RemoteEntryNotFoundError):
        return (
            f"{repo}: file not found on the Hub",
            "check the revision; the publisher may have rewritten it",
        )
    if status is not None:
        return f"{repo}: the Hub answered HTTP {status}", "try again later"
    detail = str(error).splitlines()[0] if str(error) else ""
    return (
        redact(f"{repo}: cannot reach the Hub ({type(error).__name__}: {detail})"),
        "check your network, HF_ENDPOINT and your proxy, then try again",
    )


class Stop(Exception):
    """A failure not worth retrying (a body over its size, a deadline passed); carries the final
    message and its fix."""

    def __init__(self, message: str, fix: str = CHECK_ENDPOINT) -> None:
        super().__init__(message)
        self.fix = fix


class Transport:
    """huggingface_hub's session and headers for one token, with kernlock's bounds and retry
    policy."""

    def __init__(
        self, token: str | bool | None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.token = token
        self._sleep = sleep
        self._lock = threading.Lock()
        self._hf_headers: dict[str, str] | None = None

    def call(self, repo: str, fn: Callable[[float], T], deadline: float | None = None) -> T:
        """Run `fn(deadline)` with bounded retries on transient failures, all within one deadline.

        Waits follow the Hub's `RateLimit` header on a 429 (until the window resets, up to
        `KERNLOCK_RATE_LIMIT_WAIT`, announced in one line), else `Retry-After`, else backoff.
        """
        from huggingface_hub.utils import get_session

        deadline = deadline if deadline is not None else time.monotonic() + hub_deadline()
        _bound_session(get_session())
        # a call inside a call (or `overall_deadline`) keeps the earlier one
        outer = getattr(_scope, "deadline", None)
        deadline = _scope.deadline = deadline if outer is None else min(outer, deadline)
        try:
            delay = BASE_DELAY
            for attempt in range(1, MAX_ATTEMPTS + 1):
                try:
                    return fn(deadline)
                except Stop as error:
                    raise HubError(f"{repo}: {error}", fix=error.fix) from None
                except KernlockError:
                    raise
                except Exception as error:
                    if attempt == MAX_ATTEMPTS or not _is_transient(error):
                        problem, fix = describe(error, repo)
                        raise HubError(problem, fix=fix) from error
                    wait = self.wait(repo, error, delay, deadline)
                    self._sleep(wait)
                    delay *= 2
            raise AssertionError("unreachable")
        finally:
            _scope.deadline = outer

    def wait(self, repo: str, error: BaseException, backoff: float, deadline: float) -> float:
        """Seconds to wait before retrying after `error`, or a `HubError` when that is too long."""
        from huggingface_hub.utils import parse_ratelimit_headers

        response = getattr(error, "response", None)
        limit = (
            parse_ratelimit_headers(response.headers)
            if http_status(error) == 429 and response is not None
            else None
        )
        left = deadline - time.monotonic()
        if limit is not None and limit.remaining == 0:
            wait = float(limit.reset_in_seconds)
            quota = f" ({limit.limit} requests per {limit.window_seconds} s)" if limit.limit else ""
            why = f"the Hub's {limit.resource_type!r} rate limit{quota} is used up"
            bound = min(seconds(RATE_LIMIT_WAIT_ENV, DEFAULT_RATE_LIMIT_WAIT), left)
            if wait > bound:
                raise HubError(
                    f"{repo}: {why} for another {wait:.0f} s",
                    fix="re-run after that (logged-in users, with HF_TOKEN, get a larger "
                    f"quota), or allow a longer wait with {RATE_LIMIT_WAIT_ENV}",
                ) from None
            logger.warning(
                "kernlock: %s: %s; waiting %.0f s for the window to reset", repo, why, wait
            )
            return wait
        retry_after = _retry_after(error)
        wait = retry_after if retry_after is not None else backoff
        if wait > left:
            problem, fix = describe(error, repo)
            raise HubError(
                f"{problem} (gave up: no answer within {hub_deadline():.0f} s, {DEADLINE_ENV})",
                fix=f"{fix}, or allow a longer wait with {DEADLINE_ENV}",
            ) from None
        if wait >= 1:
            logger.warning(
                "kernlock: %s: the Hub answered HTTP %s; retrying in %.0f s",
                repo,
                http_status(error),
                wait,
            )
        return wait

    def headers(self) -> dict[str, str]:
        """huggingface_hub's request headers, built once: building them can cost a request of its
        own (its once-a-day agent lookup), which parallel first calls would each make."""
        from huggingface_hub.utils import build_hf_headers

        with self._lock:
            if self._hf_headers is None:
                self._hf_headers = build_hf_headers(token=self.token, library_name="kernlock")
            return dict(self._hf_headers)

    def request(
        self,
        url: str,
        deadline: float,
        *,
        timeout: float,
        limit: int,
        params: dict[str, str] | None = None,
        sink: Callable[[bytes], object] | None = None,
        follow: bool = False,
        headers: dict[str, str] | None = None,
        on_response: Callable[[Any], int | None] | None = None,
    ) -> httpx2.Response:
        """GET `url` with timeouts; read at most `limit` bytes before `deadline`; raise for HTTP
        errors.

        The body goes to `sink` (a successful answer) or into the returned, complete response.
        `on_response` sees a successful answer's status and headers before its body, and may
        return a new `limit` (a resumed download: 206, or a full 200 after all).
        """
        from huggingface_hub.utils import get_session, hf_raise_for_status

        # a float, not a Timeout object: the session is httpx2's (huggingface_hub 2.x) or httpx's
        # (1.x)
        with get_session().stream(
            "GET",
            url,
            params=params,
            headers=headers or self.headers(),
            timeout=timeout,
            follow_redirects=follow,
        ) as response:
            ok = response.status_code < 300
            if ok and on_response is not None:
                limit = on_response(response) or limit
            cap = limit if ok else ERROR_BODY_LIMIT
            declared = response.headers.get("Content-Length", "")
            if ok and declared.isdigit() and int(declared) > cap:
                raise Stop(
                    f"{redact(str(response.url))} announces {declared} bytes, more than the {cap} "
                    "expected; nothing was kept"
                )
            chunks: list[bytes] = []
            received = 0
            for chunk in response.iter_bytes():
                received += len(chunk)
                if received > cap:
                    if not ok:
                        break
                    raise Stop(
                        f"{redact(str(response.url))} sent more than the {cap} bytes expected; "
                        "nothing was kept"
                    )
                if time.monotonic() > deadline:
                    raise Stop(
                        f"{redact(str(response.url))} did not finish within {hub_deadline():.0f} s "
                        f"({DEADLINE_ENV}); nothing was kept",
                        fix=f"try again on a faster network, or allow longer with {DEADLINE_ENV}",
                    )
                (sink if ok and sink is not None else chunks.append)(chunk)
            # The bytes are decoded already: drop the headers that would have them decoded twice.
            kept = [
                (k, v)
                for k, v in response.headers.multi_items()
                if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
            ]
            complete = type(response)(
                response.status_code,
                headers=kept,
                content=b"".join(chunks),
                request=response.request,
            )
        if complete.status_code >= 400:
            hf_raise_for_status(complete)
        return complete

    def api_get(
        self, repo: str, url: str, deadline: float, params: dict[str, str] | None = None
    ) -> httpx2.Response:
        """GET a Hub API URL, following redirects on the same host only (the Hub's answer for a
        renamed repo)."""
        for _ in range(MAX_REDIRECTS + 1):
            response = self.request(
                url, deadline, timeout=etag_timeout(), limit=API_BODY_LIMIT, params=params
            )
            if not response.is_redirect:
                return response
            target = urljoin(str(response.url), response.headers.get("Location", ""))
            if urlsplit(target).netloc != urlsplit(str(response.url)).netloc:
                raise Stop(
                    f"{redact(str(response.url))} redirects to {redact(target)}, on another host; "
                    "kernlock does not follow it nor take it for a repo rename",
                    fix="check HF_ENDPOINT and your proxy",
                )
            url, params = target, None
        raise Stop(f"{redact(url)}: more than {MAX_REDIRECTS} redirects")
