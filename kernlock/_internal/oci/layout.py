"""An OCI image layout on disk (`oci-layout`, `index.json`, `blobs/sha256/<hex>`), the store behind
`oci-layout:DIR`: what Kubernetes image volumes, `oras cp --from-oci-layout` and `skopeo copy oci:`
read, and what an air-gapped cluster carries in.

A tag is an `index.json` entry named by `org.opencontainers.image.ref.name`; a manifest pushed by
digest only is a blob (the lock's index reaches it).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernlock._internal.fs.inside import write_inside
from kernlock._internal.spec.oci_ref import OciRef
from kernlock.errors import IntegrityError, MissingFilesError, UsageError

REF_NAME = "org.opencontainers.image.ref.name"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
_CHUNK = 1 << 20


class Layout:
    """The OCI image layout in `ref.layout`."""

    def __init__(self, ref: OciRef, *, push: bool = False) -> None:
        assert ref.layout is not None
        self.ref, self.root, self.where = ref, ref.layout, f"the OCI layout {ref.layout}"
        if not push and not (self.root / "oci-layout").is_file():
            raise MissingFilesError(
                f"{self.root} is not an OCI image layout (it has no oci-layout file)",
                fix=f"name the directory `kernlock vendor --to oci-layout:{self.root}` wrote",
            )

    def _blob(self, digest: str) -> Path:
        algorithm, _, hex_digest = digest.partition(":")
        return self.root / "blobs" / algorithm / hex_digest

    def has_blob(self, digest: str) -> bool:
        """Whether the layout holds blob `digest`."""
        return self._blob(digest).is_file()

    def put_blob(self, digest: str, source: Path | bytes) -> None:
        """Copy `source` (a file, or bytes) in as blob `digest`, whole or not at all; bytes that do
        not hash to `digest` are refused, as a registry refuses them."""

        def copy(out: Any) -> None:
            hashed = hashlib.sha256()
            with open(source, "rb") if isinstance(source, Path) else io.BytesIO(source) as reader:
                while chunk := reader.read(_CHUNK):
                    hashed.update(chunk)
                    out.write(chunk)
            if f"sha256:{hashed.hexdigest()}" != digest:
                name = source if isinstance(source, Path) else "a blob"
                raise IntegrityError(
                    f"{name} changed while it was copied into {self.where} (its bytes are now "
                    f"sha256:{hashed.hexdigest()}, not {digest}); nothing was kept",
                    fix="run `kernlock sync --repair`, then push again",
                )

        self._write(digest, copy)

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> None:
        """Store a manifest or index; a tag `reference` also names it in `index.json`."""
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        self._write(digest, lambda out: out.write(body))
        if reference == digest:
            return
        entries = [
            m
            for m in self._index()["manifests"]
            if m.get("annotations", {}).get(REF_NAME) != reference
        ]
        descriptor = {
            "mediaType": media_type,
            "digest": digest,
            "size": len(body),
            "annotations": {REF_NAME: reference},
        }
        index = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": [*entries, descriptor]}
        write_inside(self.root, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}) + "\n")
        write_inside(self.root, "index.json", json.dumps(index, indent=2) + "\n")

    def manifest(self, reference: str) -> bytes:
        """The manifest or index stored under `reference` (a digest, or a tag of `index.json`)."""
        digest = reference if reference.startswith("sha256:") else self._tagged(reference)
        try:
            return self._blob(digest).read_bytes()
        except FileNotFoundError:
            raise self._missing(f"manifest {digest}") from None

    @contextmanager
    def blob(self, digest: str) -> Iterator[Iterable[bytes]]:
        """The bytes of blob `digest` as the layout holds them (unchecked)."""
        path = self._blob(digest)
        if not path.is_file():
            raise self._missing(f"blob {digest}")
        with open(path, "rb") as handle:
            yield iter(lambda: handle.read(_CHUNK), b"")

    def _index(self) -> dict[str, Any]:
        try:
            index = json.loads((self.root / "index.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"manifests": []}
        except (OSError, ValueError) as error:
            raise UsageError(
                f"{self.root}/index.json cannot be read ({error})",
                fix=f"push again: `kernlock vendor --to oci-layout:{self.root}`",
            ) from None
        if not isinstance(index, dict) or not isinstance(index.get("manifests"), list):
            raise UsageError(
                f"{self.root}/index.json is not an OCI image index",
                fix=f"push again: `kernlock vendor --to oci-layout:{self.root}`",
            )
        return index

    def _tagged(self, tag: str) -> str:
        for entry in self._index()["manifests"]:
            if isinstance(entry, dict) and entry.get("annotations", {}).get(REF_NAME) == tag:
                return str(entry.get("digest"))
        raise self._missing(f"tag {tag}")

    def _missing(self, what: str) -> MissingFilesError:
        return MissingFilesError(
            f"{self.where} has no {what}",
            fix=f"push the lock's kernels there first: `kernlock vendor --to {self.ref.location}`",
        )

    def _write(self, digest: str, fill: Any) -> None:
        final = self._blob(digest)
        if final.is_file():
            return
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".incoming-", dir=final.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                fill(out)
            os.chmod(temp, 0o444)
            os.replace(temp, final)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
