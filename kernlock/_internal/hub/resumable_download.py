"""A resumable download of one Hub file into a private partial file: continued with `Range` and
`If-Range` while the server's validator holds, started again otherwise, hashed as it is written.

`kernlock._internal.hub.client.Hub.download_to` runs it through the Hub's retries.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from kernlock._internal.hub.responses import RemoteFile
from kernlock._internal.hub.transport import (
    Transport,
    download_timeout,
)
from kernlock.errors import WriteError, local_write_problem


class Partial(Protocol):
    """What a download writes into: an open private file and its recorded validator
    (`kernlock._internal.fetch.partial`)."""

    fd: int
    path: Path

    def validator(self) -> str | None: ...

    def record(self, etag: str | None) -> None: ...


def download_to(
    transport: Transport,
    call: Callable[[str, Callable[[float], None], float], None],
    repo: str,
    remote: RemoteFile,
    size: int,
    partial: Partial,
    deadline: float,
) -> tuple[int, str]:
    """Stream `remote` into the open `partial`, at most `size` bytes, by `deadline`; return the
    bytes resumed and the sha256 of the whole file, hashed as the bytes are written (a kept
    prefix is read once, from the same descriptor: `partial` is a private file only this user
    can write, `kernlock._internal.fetch.partial`).

    Bytes already in the file are kept and continued with `Range: bytes=N-` and
    `If-Range: <validator>` when the server's validator (its `ETag`) is the one recorded
    beside it when they were received; on every retry after a dropped
    connection likewise. A full 200 (the validator changed, or ranges unsupported) starts
    again from byte 0; so does a partial without a recorded validator.
    """
    headers = transport.headers()
    if urlsplit(remote.location).netloc != urlsplit(remote.url).netloc:
        headers.pop("authorization", None)  # a signed CDN URL: no token, as huggingface_hub does
    fd = partial.fd
    resumed = 0
    digest = hashlib.sha256()

    def fetch(deadline: float) -> None:
        nonlocal resumed, digest
        try:
            offset = os.fstat(fd).st_size
            validator = partial.validator() if offset else None
            if offset and (validator is None or offset > size):
                os.ftruncate(fd, 0)
                offset = 0
            # all there already (killed before the rename): only the hash check is left
            if offset == size:
                resumed, digest = offset, _sha256_prefix(fd, offset)
                return
            asked = dict(headers)
            if offset:
                asked.update({"Range": f"bytes={offset}-", "If-Range": validator or ""})

            def start(response: object) -> int:
                nonlocal offset, digest
                status = getattr(response, "status_code", 200)
                answered = getattr(response, "headers", {})
                if (
                    offset
                    and status == 206
                    and answered.get("Content-Range", "").startswith(f"bytes {offset}-")
                ):
                    digest = _sha256_prefix(fd, offset)
                    return size - offset
                digest = hashlib.sha256()
                if offset:  # a full answer after all: the bytes kept are dropped
                    os.ftruncate(fd, 0)
                    offset = 0
                etag = answered.get("ETag", "")
                partial.record(etag if etag and not etag.startswith("W/") else None)
                return size

            def write(chunk: bytes) -> None:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
                digest.update(chunk)

            transport.request(
                remote.location,
                deadline,
                timeout=download_timeout(),
                limit=size - offset,
                sink=write,
                follow=True,
                headers=asked,
                on_response=start,
            )
            resumed = max(resumed, offset)
            received = os.fstat(fd).st_size
            if received != size:
                raise ConnectionError(f"{remote.url}: received {received} of {size} bytes")
        # this machine's disk (full, read-only) is never retried nor blamed on the Hub
        except OSError as error:
            local = local_write_problem(error, partial.path.parent)
            if local is None:
                raise
            raise WriteError(local[0], fix=local[1]) from None

    call(repo, fetch, deadline)
    return resumed, digest.hexdigest()


def _sha256_prefix(fd: int, size: int) -> hashlib._Hash:
    """A sha256 fed the first `size` bytes of the open file `fd` (the part of a resumed download
    already there)."""
    digest = hashlib.sha256()
    offset = 0
    while offset < size and (chunk := os.pread(fd, min(size - offset, 1 << 20), offset)):
        digest.update(chunk)
        offset += len(chunk)
    return digest
