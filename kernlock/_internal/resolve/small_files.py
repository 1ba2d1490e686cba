"""The small (git, not LFS) files of the variants being locked, fetched once per resolution by git
blob id.

The same blob in several variants, commits or repos is one request. `Hub.fetch` checks the bytes
against the blob id, so they are the bytes of every file the Hub lists with that id (as an LFS
file's sha256 comes from the listing).
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor, Future

from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.variants import TreeFile


class SmallFiles:
    """Requests and reads small files through one executor, one request per git blob id."""

    def __init__(self, hub: Hub, pool: Executor) -> None:
        self.hub = hub
        self.pool = pool
        self._blobs: dict[
            str, tuple[tuple[str, str], Future[bytes]]
        ] = {}  # blob id -> (repo, path), its bytes
        self._mutex = threading.Lock()

    def request(self, repo: str, commit: str, entry: TreeFile) -> Future[bytes]:
        """The bytes of `entry`, asked for once per blob id (a later request for the same blob
        shares the first)."""
        with self._mutex:
            known = self._blobs.get(entry.blob_id)
            if known is None:
                future = self.pool.submit(
                    self.hub.fetch, repo, commit, entry.path, entry.blob_id, entry.size
                )
                known = self._blobs[entry.blob_id] = ((repo, entry.path), future)
            return known[1]

    def read(self, repo: str, commit: str, entry: TreeFile) -> bytes:
        """`request`'s bytes; fetched for this very file where the shared fetch, made for another
        file, failed (so an error names this repo and file) or where the listing gives this file
        another size."""
        future = self.request(repo, commit, entry)
        with self._mutex:
            owner = self._blobs[entry.blob_id][0]
        try:
            data = future.result()
        except Exception:
            if owner == (repo, entry.path):
                raise
            return self.hub.fetch(repo, commit, entry.path, entry.blob_id, entry.size)
        if len(data) != entry.size:
            return self.hub.fetch(repo, commit, entry.path, entry.blob_id, entry.size)
        return data
