"""The shape of a lock's kernels as OCI artifacts.

One image manifest per locked variant (artifactType `application/vnd.kernlock.variant.v1`): an
empty config, one layer per locked file, each the file's bytes as they are (so the blob's digest is
the lock's sha256) and named by `org.opencontainers.image.title`, as ORAS names files; the repo,
commit, variant and targets as annotations. One image index per lock (artifactType
`application/vnd.kernlock.lock.v1`) lists them, each with the same annotations, so a puller reads
the index and only its own target's manifests. Every document is canonical JSON (sorted keys, no
spaces, no timestamps): the same lock gives the same digests wherever it is pushed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant
from kernlock._internal.spec.oci_ref import OciRef
from kernlock.errors import IntegrityError, MissingFilesError

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
VARIANT_ARTIFACT = "application/vnd.kernlock.variant.v1"
LOCK_ARTIFACT = "application/vnd.kernlock.lock.v1"
FILE_TYPE = "application/vnd.kernlock.file.v1"
EMPTY = b"{}"  # the OCI empty descriptor's blob (`application/vnd.oci.empty.v1+json`)
EMPTY_DIGEST = "sha256:" + hashlib.sha256(EMPTY).hexdigest()
TITLE = "org.opencontainers.image.title"
REPO, COMMIT, VARIANT, TARGETS = (
    f"dev.kernlock.{k}" for k in ("repo", "commit", "variant", "targets")
)


def canonical(document: Mapping[str, Any]) -> bytes:
    """`document` as canonical JSON bytes."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest_of(body: bytes) -> str:
    """The OCI digest of `body`."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _identity(kernel: LockedKernel, variant: LockedVariant) -> dict[str, str]:
    return {REPO: kernel.repo, COMMIT: kernel.commit, VARIANT: variant.name}


@dataclass(frozen=True)
class VariantArtifact:
    """A locked variant's manifest, as pushed."""

    kernel: LockedKernel
    variant: LockedVariant
    body: bytes

    @property
    def digest(self) -> str:
        return digest_of(self.body)


def variant_manifest(kernel: LockedKernel, variant: LockedVariant) -> VariantArtifact:
    """The manifest of one locked variant."""
    layers = [
        {
            "mediaType": FILE_TYPE,
            "digest": f"sha256:{f.sha256}",
            "size": f.size,
            "annotations": {TITLE: f.path},
        }
        for f in sorted(variant.files, key=lambda f: f.path)
    ]
    annotations = {
        **_identity(kernel, variant),
        TARGETS: ",".join(sorted(map(str, variant.targets))),
    }
    document = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "artifactType": VARIANT_ARTIFACT,
        "config": {
            "mediaType": "application/vnd.oci.empty.v1+json",
            "digest": EMPTY_DIGEST,
            "size": len(EMPTY),
        },
        "layers": layers,
        "annotations": annotations,
    }
    return VariantArtifact(kernel, variant, canonical(document))


def lock_index(artifacts: list[VariantArtifact]) -> bytes:
    """The index of a lock's pushed variants."""
    manifests = {
        a.digest: {
            "mediaType": MANIFEST_TYPE,
            "artifactType": VARIANT_ARTIFACT,
            "digest": a.digest,
            "size": len(a.body),
            "annotations": _identity(a.kernel, a.variant),
        }
        for a in artifacts
    }
    document = {
        "schemaVersion": 2,
        "mediaType": INDEX_TYPE,
        "artifactType": LOCK_ARTIFACT,
        "manifests": [manifests[d] for d in sorted(manifests)],
    }
    return canonical(document)


def _document(body: bytes, what: str, ref: OciRef) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise MissingFilesError(
            f"{ref}: {what} is not JSON: not a kernlock artifact",
            fix=f"push the lock's kernels there: `kernlock vendor --to {ref.location}`",
        )
    return document


def variant_in_index(
    index: bytes, kernel: LockedKernel, variant: LockedVariant, ref: OciRef
) -> str:
    """The digest of the manifest the index lists for a locked variant."""
    wanted = _identity(kernel, variant)
    for entry in _document(index, "the index", ref).get("manifests") or []:
        if isinstance(entry, dict) and entry.get("annotations", {}) | wanted == entry.get(
            "annotations"
        ):
            return str(entry.get("digest"))
    raise MissingFilesError(
        f"{kernel.spec}: {ref} holds no {variant.name} at {kernel.commit[:12]} (its index "
        "was pushed from another lock, or for other targets or groups)",
        fix=f"push this lock's kernels there: `kernlock vendor --to {ref.location}`",
    )


def file_layers(
    manifest: bytes, kernel: LockedKernel, variant: LockedVariant, ref: OciRef
) -> dict[str, str]:
    """Each locked file's blob digest, from a variant's manifest; a file it lists with another
    digest or size than the lock is an `IntegrityError` naming both digests."""
    listed: dict[str, dict[str, Any]] = {}
    for layer in _document(manifest, f"the manifest of {variant.name}", ref).get("layers") or []:
        if isinstance(layer, dict) and isinstance(layer.get("annotations"), dict):
            listed[str(layer["annotations"].get(TITLE))] = layer
    found: dict[str, str] = {}
    for locked in variant.files:
        layer = listed.get(locked.path)
        if layer is None:
            raise MissingFilesError(
                f"{kernel.spec}: {ref} lists no {variant.name}/{locked.path} in its manifest",
                fix=f"push this lock's kernels there again: `kernlock vendor --to {ref.location}`",
            )
        theirs, size = str(layer.get("digest")), layer.get("size")
        if theirs != f"sha256:{locked.sha256}" or size != locked.size:
            raise IntegrityError(
                f"{kernel.spec}: {ref} lists {variant.name}/{locked.path} as {theirs} "
                f"({size} bytes), but kernels.lock expects sha256:{locked.sha256} "
                f"({locked.size} bytes); nothing was downloaded",
                fix=f"push this lock's kernels there again: `kernlock vendor --to {ref.location}`",
            )
        found[locked.path] = theirs
    return found
