"""An OCI registry over the distribution API (`/v2/<name>/blobs`, `/manifests`): the handful of
requests a push and a pull make, with the registry's own auth dance (`WWW-Authenticate`: Basic, or
a Bearer token from its token server, with the Docker/ORAS credentials of `credentials`).

Plain HTTP only to a registry on loopback (as Docker); redirects are followed (blob GETs often go to
object storage), and the HTTP client drops `Authorization` when one leaves the registry's host.
Every failure is one line naming the registry, as `MissingFilesError` on reads and `WriteError` on
pushes.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernlock._internal.oci.credentials import Credentials, credentials_for
from kernlock._internal.spec.oci_ref import OciRef
from kernlock.errors import KernlockError, MissingFilesError, WriteError

_CHUNK = 1 << 20
_TIMEOUT = 60.0  # seconds to connect, and between two reads
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_ATTEMPTS = 4  # per request: a dropped connection, a 429 or a 5xx is tried again
_RETRY = (429, 500, 502, 503, 504)
_BACKOFF = 0.25  # seconds, doubled per attempt
_MAX_WAIT = 30.0  # the longest `Retry-After` honoured
MANIFEST_LIMIT = 16 << 20  # bytes: an index of 500 kernels x 20 targets is about 3 MiB
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
)


def _http() -> Any:
    """huggingface_hub's HTTP library: httpx2 (huggingface_hub 2.x), else httpx (1.x)."""
    for name in ("httpx2", "httpx"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError("neither httpx2 nor httpx is installed (huggingface_hub needs one)")


def _retry_after(answer: Any) -> float | None:
    try:
        return max(0.0, float(answer.headers.get("Retry-After", "")))
    except ValueError:
        return None


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            yield chunk


class Registry:
    """One repository of a registry (`ref.host`, `ref.repository`)."""

    def __init__(self, ref: OciRef, *, push: bool = False) -> None:
        assert ref.host is not None
        http = _http()
        self.ref, self.where, self._push = ref, f"{ref.host}/{ref.repository}", push
        self._base = f"{'http' if ref.plain_http else 'https'}://{ref.host}/v2/{ref.repository}"
        self._client = http.Client(follow_redirects=True, timeout=http.Timeout(_TIMEOUT))
        self._errors: tuple[type[BaseException], ...] = (http.HTTPError, OSError)
        self._authorization: str | None = None

    def has_blob(self, digest: str) -> bool:
        """Whether the repository holds blob `digest`."""
        with self._send("HEAD", f"{self._base}/blobs/{digest}", what=f"blob {digest}") as answer:
            return answer.status_code == 200

    def put_blob(self, digest: str, source: Path | bytes) -> None:
        """Upload `source` (a file, or bytes) as blob `digest`: a monolithic upload, POST then PUT;
        the registry refuses bytes that do not hash to `digest`."""
        name = source.name if isinstance(source, Path) else digest
        what = f"upload of {name} ({digest})"
        with self._send("POST", f"{self._base}/blobs/uploads/", what=what, expect=(202,)) as answer:
            location = str(answer.headers.get("Location", ""))
        if location.startswith("/"):
            location = self._base.split("/v2/", 1)[0] + location
        url = f"{location}{'&' if '?' in location else '?'}digest={digest}"

        def body() -> bytes | Iterator[bytes]:
            if isinstance(source, bytes):
                return source
            return _chunks(source)

        size = len(source) if isinstance(source, bytes) else source.stat().st_size
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        with self._send("PUT", url, what=what, expect=(201,), headers=headers, content=body):
            pass

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> None:
        """Store a manifest or index under `reference` (its digest, or a tag)."""
        headers = {"Content-Type": media_type}
        with self._send(
            "PUT",
            f"{self._base}/manifests/{reference}",
            what=f"manifest {reference}",
            expect=(201,),
            headers=headers,
            content=lambda: body,
        ):
            pass

    def manifest(self, reference: str) -> bytes:
        """The manifest or index stored under `reference`, as its bytes."""
        headers = {"Accept": ", ".join(MANIFEST_TYPES)}
        url = f"{self._base}/manifests/{reference}"
        what = f"manifest {reference}"
        body = bytearray()
        with self._send("GET", url, what=what, expect=(200,), headers=headers) as answer:
            for chunk in self._body(answer, what):
                body += chunk
                if len(body) > MANIFEST_LIMIT:
                    raise MissingFilesError(
                        f"{self.where}: {what} is over {MANIFEST_LIMIT >> 20} MiB: not a kernlock "
                        "artifact",
                        fix="push the lock's kernels there: "
                        f"`kernlock vendor --to {self.ref.location}`",
                    )
        return bytes(body)

    @contextmanager
    def blob(self, digest: str) -> Iterator[Iterable[bytes]]:
        """The bytes of blob `digest`, streamed as the registry sends them (unchecked)."""
        url = f"{self._base}/blobs/{digest}"
        with self._send("GET", url, what=f"blob {digest}", expect=(200,)) as answer:
            yield self._body(answer, f"blob {digest}")

    def _body(self, answer: Any, what: str) -> Iterator[bytes]:
        try:
            yield from answer.iter_bytes(_CHUNK)
        except self._errors as error:
            raise self._unreachable(what, error) from None

    @contextmanager
    def _send(
        self,
        method: str,
        url: str,
        *,
        what: str,
        expect: tuple[int, ...] = (200, 404),
        headers: dict[str, str] | None = None,
        content: Callable[[], bytes | Iterable[bytes]] | None = None,
    ) -> Iterator[Any]:
        """One request, answered after the registry's auth challenge if it makes one; the answer
        has a status in `expect`."""
        answer = self._open(method, url, what, expect, headers or {}, content)
        try:
            yield answer
        finally:
            answer.close()

    def _open(
        self,
        method: str,
        url: str,
        what: str,
        expect: tuple[int, ...],
        headers: dict[str, str],
        content: Callable[[], bytes | Iterable[bytes]] | None,
    ) -> Any:
        """Send until answered: once more after an auth challenge, and up to `_ATTEMPTS` times in
        all after a dropped connection, a 429 or a 5xx (waiting as `Retry-After` asks, bounded)."""
        authorized = False
        for attempt in range(1, _ATTEMPTS + 1):
            sent = dict(headers)
            if self._authorization:
                sent["Authorization"] = self._authorization
            try:
                request = self._client.build_request(
                    method, url, headers=sent, content=content() if content else None
                )
                answer = self._client.send(request, stream=True)
            except self._errors as error:
                if attempt == _ATTEMPTS:
                    raise self._unreachable(what, error) from None
                time.sleep(_BACKOFF * 2**attempt)
                continue
            if answer.status_code == 401 and not authorized and self._authorize(answer):
                authorized = True
                answer.close()
                continue
            if answer.status_code in _RETRY and attempt < _ATTEMPTS:
                wait = _retry_after(answer) or _BACKOFF * 2**attempt
                answer.close()
                time.sleep(min(wait, _MAX_WAIT))
                continue
            break
        if answer.status_code not in expect:
            try:
                self._refuse(answer, what)
            finally:
                answer.close()
        return answer

    def _unreachable(self, what: str, error: BaseException) -> KernlockError:
        return self._error(
            f"{self.where}: {what} failed ({type(error).__name__}: {error})",
            fix=f"check that the registry {self.ref.host} is up and reachable from here",
        )

    def _authorize(self, answer: Any) -> bool:
        """Answer a 401's challenge: Basic with the stored credentials, or a Bearer token from the
        registry's token server. False when there is nothing to answer with."""
        challenge = str(answer.headers.get("WWW-Authenticate", ""))
        scheme, _, params = challenge.partition(" ")
        found = credentials_for(str(self.ref.host))
        if scheme.lower() == "basic":
            if found is None or not found.username:
                return False
            self._authorization = self._basic(found)
            return True
        if scheme.lower() != "bearer":
            return False
        fields = dict(_CHALLENGE.findall(params))
        scope = f"repository:{self.ref.repository}:{'pull,push' if self._push else 'pull'}"
        query = {"service": fields.get("service", ""), "scope": scope}
        realm = fields.get("realm", "")
        if found is not None and found.identity_token:
            form = {**query, "grant_type": "refresh_token", "refresh_token": found.identity_token}
            token = self._client.post(realm, data=form)
        else:
            auth = {"Authorization": self._basic(found)} if found and found.username else {}
            token = self._client.get(realm, params=query, headers=auth)
        if token.status_code != 200:
            return False
        payload = token.json()
        value = payload.get("token") or payload.get("access_token")
        if not isinstance(value, str) or not value:
            return False
        self._authorization = f"Bearer {value}"
        return True

    @staticmethod
    def _basic(found: Credentials | None) -> str:
        import base64

        assert found is not None
        pair = f"{found.username}:{found.password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")

    def _refuse(self, answer: Any, what: str) -> None:
        answer.read()
        detail = ""
        try:
            errors = answer.json().get("errors") or []
            detail = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors[:3])
        except ValueError:
            detail = answer.text[:200].strip()
        status = answer.status_code
        problem = f"{self.where}: {what} failed (HTTP {status}{': ' + detail if detail else ''})"
        if status in (401, 403):
            verb = "push to" if self._push else "pull from"
            fix = (
                f"log in with an account that may {verb} it: `docker login {self.ref.host}` or "
                f"`oras login {self.ref.host}`"
            )
        elif status == 404:
            fix = f"push the lock's kernels there first: `kernlock vendor --to {self.ref.location}`"
        else:
            fix = f"check the registry {self.ref.host} (its logs say why), then re-run"
        raise self._error(problem, fix=fix)

    def _error(self, problem: str, *, fix: str) -> KernlockError:
        return WriteError(problem, fix=fix) if self._push else MissingFilesError(problem, fix=fix)
