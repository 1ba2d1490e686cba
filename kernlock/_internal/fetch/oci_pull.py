"""Locked files pulled from an OCI mirror (`kernlock sync --from`, `KERNLOCK_MIRROR` for `apply()`
and `kernlock run`) into the Hub cache, in the layout the Hub download engine writes: the same
per-file locks, a blob named by its sha256 and a relative snapshot link, so kernels, `apply()` and
`verify --cache` find them where a Hub download would have put them. No Hub request is made.

Only this machine's variants are read: the lock's index (by the digest the lock records for the
location, else the one the location names, else its tag), then each variant's manifest by digest,
then its blobs. Every document and every byte is checked before it is kept: a manifest whose bytes
do not hash to its digest, a layer listed with another digest than the lock's, and a blob whose
bytes are not the lock's are `IntegrityError`s naming the file and both digests.
"""

from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernlock._internal import settings

# the download engine's own steps for placing a checked blob, so both write one cache layout
from kernlock._internal.fetch.download import _link, _new_partial, _publish
from kernlock._internal.fetch.download_lock import download_lock, file_lock_name
from kernlock._internal.fetch.partial import drop, open_below, opened_below
from kernlock._internal.lockfile.entries import LockedFile, LockedKernel, LockedVariant, Lockfile
from kernlock._internal.lockfile.mirror_edit import recorded_index
from kernlock._internal.oci.artifact import digest_of, file_layers, variant_in_index
from kernlock._internal.oci.store import Store, open_store
from kernlock._internal.spec.oci_ref import OciRef, parse_ref
from kernlock._internal.store.hub_cache import FileKey, repo_folder
from kernlock.errors import IntegrityError

FROM_HUB = "fetch it from the Hub instead: run `kernlock sync` where the Hub is reachable"


class MirrorFetch:
    """Fetches a lock's files from one OCI location: `download_variant`'s signature, so `sync` and
    `ensure_variant` take it in the Hub's place."""

    def __init__(self, source: str, lock: Lockfile) -> None:
        ref = parse_ref(source)
        recorded = recorded_index(lock, ref.location) if ref.digest is None else None
        self.ref: OciRef = ref.at(recorded) if recorded else ref
        self.location = str(self.ref)
        self._store: Store | None = None
        self._index: bytes | None = None
        self._mutex = threading.Lock()

    def _opened(self) -> tuple[Store, bytes]:
        """The store and the lock's index in it, read once."""
        with self._mutex:
            if self._store is None or self._index is None:
                store = open_store(self.ref)
                self._index = self._checked(
                    store.manifest(self.ref.reference), self.ref.digest, "index"
                )
                self._store = store
            return self._store, self._index

    def _checked(self, body: bytes, digest: str | None, what: str) -> bytes:
        if digest is not None and digest_of(body) != digest:
            raise IntegrityError(
                f"{self.location} sent its {what} {digest} as bytes with {digest_of(body)}; "
                "nothing was downloaded",
                fix=FROM_HUB,
            )
        return body

    def __call__(
        self,
        kernel: LockedKernel,
        variant: LockedVariant,
        cache: Path,
        files: list[LockedFile] | None = None,
        force: bool = False,
        fetched: list[int] | None = None,
    ) -> dict[str, FileKey]:
        """Fetch `files` (default: all) of a locked variant into `cache`; the keys of those this
        call wrote, each checked against the lock as its bytes arrived."""
        wanted = list(variant.files if files is None else files)
        if not wanted:
            return {}
        store, index = self._opened()
        digest = variant_in_index(index, kernel, variant, self.ref)
        manifest = self._checked(store.manifest(digest), digest, f"manifest of {variant.name}")
        file_layers(manifest, kernel, variant, self.ref)  # every layer is the lock's

        def install(locked: LockedFile) -> FileKey | None:
            return _install(self, store, kernel, variant.name, locked, cache, force, fetched)

        with ThreadPoolExecutor(max_workers=min(8, len(wanted))) as pool:
            keys = list(pool.map(install, wanted))
        return {f.path: key for f, key in zip(wanted, keys, strict=True) if key is not None}


def _install(
    mirror: MirrorFetch,
    store: Store,
    kernel: LockedKernel,
    variant: str,
    locked: LockedFile,
    cache: Path,
    force: bool,
    fetched: list[int] | None,
) -> FileKey | None:
    """One locked file from the store into the Hub cache, under the download engine's locks."""
    storage = cache / repo_folder(kernel.repo)
    link = storage / "snapshots" / kernel.commit / "build" / variant / locked.path
    locks = cache / ".locks" / repo_folder(kernel.repo)
    os.close(open_below(cache, ".locks", repo_folder(kernel.repo)))
    with download_lock(locks / file_lock_name(kernel.commit, variant, locked.path)):
        if link.is_file() and not force:
            return None
        blob = storage / "blobs" / locked.sha256
        key: FileKey | None = None
        with (
            opened_below(storage.parent, storage.name, "blobs") as blobs_fd,
            download_lock(locks / f"{locked.sha256}.lock"),
        ):
            if force or not blob.is_file():
                temp = _new_partial(blobs_fd, blob.parent, locked.sha256)
                published = False
                try:
                    actual, size = _receive(store, locked, temp.fd)
                    if actual != locked.sha256 or size != locked.size:
                        raise IntegrityError(
                            f"{kernel.spec}: {mirror.location} sent {variant}/{locked.path} with "
                            f"sha256:{actual} ({size} bytes), but kernels.lock expects "
                            f"sha256:{locked.sha256} ({locked.size} bytes); nothing was kept",
                            fix=FROM_HUB,
                        )
                    key = _publish(temp, blob, locked.sha256)
                    published = True
                    if fetched is not None:
                        fetched.append(size)
                finally:
                    os.close(temp.fd)
                    if not published:
                        drop(blobs_fd, temp.name)
            _link(storage, link, blobs_fd, blob)
        return key


def _receive(store: Store, locked: LockedFile, fd: int) -> tuple[str, int]:
    """Write blob `locked.sha256` from the store to `fd`, at most one byte past the locked size;
    its sha256 and size as received."""
    digest, size = hashlib.sha256(), 0
    with store.blob(f"sha256:{locked.sha256}") as chunks:
        for chunk in chunks:
            chunk = chunk[: locked.size + 1 - size]
            digest.update(chunk)
            size += len(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
            if size > locked.size:
                break
    return digest.hexdigest(), size


_mirrors: dict[tuple[str, int], tuple[Lockfile, MirrorFetch]] = {}


def mirror_for(lock: Lockfile) -> MirrorFetch | None:
    """The fetcher of `$KERNLOCK_MIRROR` for `lock` (one per process and lock), or None when it is
    unset: `apply()` then downloads from the Hub."""
    source = settings.text(settings.MIRROR_ENV)
    if not source:
        return None
    key = (source, id(lock))
    if key not in _mirrors:
        _mirrors[key] = (lock, MirrorFetch(source, lock))
    return _mirrors[key][1]
