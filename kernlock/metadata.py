"""A build variant's `metadata.json`: dependencies, requirements, digest and provenance, read with kernels' parser."""

from __future__ import annotations

from dataclasses import dataclass

from kernlock.errors import ResolutionError
from kernlock.kernels_adapter import kernel_request, variant_metadata
from kernlock.lockfile import LockedFile, Provenance

MAX_METADATA_BYTES = 1 << 20


@dataclass(frozen=True)
class VariantMetadata:
    """What kernlock records from a variant's `metadata.json`."""

    depends: tuple[str, ...] = ()
    kernels_minver: str | None = None
    python_depends: tuple[str, ...] = ()
    digest: dict[str, str] | None = None  # relative path -> base64 sha256, when the metadata carries one
    provenance: Provenance | None = None


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
    digest = None
    if parsed.digest is not None and str(parsed.digest.algorithm).upper().endswith("SHA256"):
        digest = dict(parsed.digest.files)
    provenance = None
    if parsed.provenance is not None:
        builder = parsed.provenance.kernel_builder
        source = parsed.provenance.kernel
        provenance = Provenance(
            builder_version=builder.version,
            builder_commit=builder.git.commit if builder.git else None,
            builder_dirty=builder.git.dirty if builder.git else None,
            source_commit=source.commit if source else None,
            source_dirty=source.dirty if source else None,
        )
    return VariantMetadata(
        depends=tuple(sorted(keys)),
        kernels_minver=str(parsed.kernels_minver) if parsed.kernels_minver is not None else None,
        python_depends=tuple(parsed.python_depends),
        digest=digest,
        provenance=provenance,
    )


def digest_mismatches(digest: dict[str, str], files: tuple[LockedFile, ...]) -> list[str]:
    """Files whose metadata digest (base64 sha256) differs from the locked sha256."""
    import base64

    by_path = {f.path: f.sha256 for f in files}
    mismatched = []
    for path, encoded in sorted(digest.items()):
        try:
            expected = base64.b64decode(encoded).hex()
        except ValueError:
            mismatched.append(path)
            continue
        if by_path.get(path) != expected:
            mismatched.append(path)
    return mismatched
