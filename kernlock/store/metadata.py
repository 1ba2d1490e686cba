"""A build variant's `metadata.json`: dependencies, requirements, digest and provenance, read with kernels' parser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernlock.compat.kernels import kernel_request, metadata_digest, variant_metadata
from kernlock.errors import ResolutionError
from kernlock.model.lockfile import LockedFile, Provenance

MAX_METADATA_BYTES = 1 << 20


@dataclass(frozen=True)
class VariantMetadata:
    """What kernlock records from a variant's `metadata.json`."""

    depends: tuple[str, ...] = ()
    kernels_minver: str | None = None
    python_depends: tuple[str, ...] = ()
    digest: dict[str, str] | None = None  # relative path -> base64 sha256, when the metadata carries one
    provenance: Provenance | None = None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def read_variant_metadata(repo: str, variant: str, metadata: bytes | None) -> VariantMetadata:
    """Parse a variant's metadata.json with kernels' own parser (size-limited)."""
    if metadata is None:
        return VariantMetadata()
    if len(metadata) > MAX_METADATA_BYTES:
        raise ResolutionError(f"{repo} {variant}: metadata.json is {len(metadata)} bytes, more than {MAX_METADATA_BYTES}")
    try:
        parsed = variant_metadata(metadata)
    except Exception as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ResolutionError(f"{repo} {variant}: metadata.json is not valid kernel metadata ({message})") from None
    keys = set()
    for dep in parsed.kernel_depends:
        repo, version, revision = kernel_request(dep)
        keys.add(f"{repo}@v{version}" if version is not None else f"{repo}@{revision}")
    found = metadata_digest(parsed)
    digest = found[1] if found is not None and found[0] == "sha256" else None
    provenance = None
    if parsed.provenance is not None:
        builder = parsed.provenance.kernel_builder
        source = parsed.provenance.kernel
        provenance = Provenance(
            builder_version=builder.version,
            builder_commit=_text(builder.git.commit) if builder.git else None,  # an `Oid` from kernels 0.18
            builder_dirty=builder.git.dirty if builder.git else None,
            source_commit=_text(source.commit) if source else None,
            source_dirty=source.dirty if source else None,
        )
    return VariantMetadata(
        depends=tuple(sorted(keys)),
        kernels_minver=str(parsed.kernels_minver) if parsed.kernels_minver is not None else None,
        python_depends=tuple(parsed.python_depends),
        digest=digest,
        provenance=provenance,
    )


# Files a variant's digest leaves out (kernels' `Digest.hash_variant`): the metadata, its signature, bytecode.
UNDIGESTED = ("metadata.json", "metadata.json.sigstore")


def digest_mismatches(digest: dict[str, str], files: tuple[LockedFile, ...]) -> list[str]:
    """Files on which a metadata digest (base64 sha256) and the locked files disagree, either way.

    A file the digest lists with another hash or that is not locked, and a locked
    file the digest does not list, both count: kernels 0.18+ refuses to load either.
    """
    import base64

    by_path = {f.path: f.sha256 for f in files if f.path not in UNDIGESTED and "__pycache__" not in f.path.split("/")}
    mismatched = []
    for path, encoded in sorted(digest.items()):
        try:
            expected = base64.b64decode(encoded, validate=True).hex()
        except ValueError:
            mismatched.append(path)
            continue
        if by_path.get(path) != expected:
            mismatched.append(path)
    return mismatched + sorted(set(by_path) - set(digest))


def digest_problem(metadata: Any, files: tuple[LockedFile, ...]) -> str | None:
    """Why a parsed `metadata.json`'s digest disagrees with the locked files, or None when it agrees (or is absent)."""
    found = metadata_digest(metadata)
    if found is None:
        return None
    algorithm, digest = found
    if algorithm != "sha256":
        return f"its metadata digest uses {algorithm}, which this kernlock cannot check"
    mismatched = digest_mismatches(digest, files)
    if not mismatched:
        return None
    more = f" and {len(mismatched) - 3} more" if len(mismatched) > 3 else ""
    return f"metadata.json's digest disagrees with the files ({', '.join(mismatched[:3])}{more})"
