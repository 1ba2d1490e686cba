"""What a push and a pull need of an OCI store, a registry (`registry.Registry`) or a layout on disk
(`layout.Layout`) alike, and the one way to open either from an `OciRef`."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from kernlock._internal.spec.oci_ref import OciRef


class Store(Protocol):
    """Blobs and manifests by digest, manifests also by tag."""

    ref: OciRef
    where: str  # how messages name it

    def has_blob(self, digest: str) -> bool: ...

    def put_blob(self, digest: str, source: Path | bytes) -> None: ...

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> None: ...

    def manifest(self, reference: str) -> bytes: ...

    def blob(self, digest: str) -> AbstractContextManager[Iterable[bytes]]: ...


def open_store(ref: OciRef, *, push: bool = False) -> Store:
    """The store `ref` names: its registry repository, or its layout directory."""
    if ref.layout is not None:
        from kernlock._internal.oci.layout import Layout

        return Layout(ref, push=push)
    from kernlock._internal.oci.registry import Registry

    return Registry(ref, push=push)
