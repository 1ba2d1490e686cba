"""A build variant's `metadata.json`: dependencies, requirements, digest and provenance, read with
kernels' parser."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernlock._internal.compat.kernels_api import (
    kernel_request,
    metadata_archs,
    metadata_digest,
    variant_metadata,
)
from kernlock._internal.lockfile.entries import LockedFile, LockedKernel, LockedVariant, Provenance
from kernlock._internal.lockfile.format_version import format_version
from kernlock._internal.spec.ids import DIGEST_ALGORITHMS
from kernlock.errors import ResolutionError

MAX_METADATA_BYTES = 1 << 20


@dataclass(frozen=True)
class VariantMetadata:
    """What kernlock records from a variant's `metadata.json`."""

    depends: tuple[str, ...] = ()
    archs: tuple[str, ...] = ()  # `backend.archs` of a CUDA/ROCm build, as listed
    kernels_minver: str | None = None
    python_depends: tuple[str, ...] = ()
    # relative path -> base64 hash, when the metadata carries a checkable one
    digest: dict[str, str] | None = None
    digest_algorithm: str | None = None  # its algorithm, one of DIGEST_ALGORITHMS
    provenance: Provenance | None = None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def read_variant_metadata(repo: str, variant: str, metadata: bytes | None) -> VariantMetadata:
    """Parse a variant's metadata.json with kernels' own parser (size-limited)."""
    if metadata is None:
        return VariantMetadata()
    if len(metadata) > MAX_METADATA_BYTES:
        raise ResolutionError(
            f"{repo} {variant}: metadata.json is {len(metadata)} bytes, more than "
            f"{MAX_METADATA_BYTES}",
            fix=f"lock another revision ({repo}@<revision>), or ask the publisher to fix its "
            "metadata.json",
        )
    try:
        parsed = variant_metadata(metadata)
    except Exception as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ResolutionError(
            f"{repo} {variant}: metadata.json is not valid kernel metadata ({message})",
            fix=f"lock another revision ({repo}@<revision>), or ask the publisher to fix its "
            "metadata.json",
        ) from None
    keys = set()
    # kernels 0.16's metadata has no kernel dependencies and no provenance
    for dep in getattr(parsed, "kernel_depends", ()):
        repo, version, revision = kernel_request(dep)
        keys.add(f"{repo}@v{version}" if version is not None else f"{repo}@{revision}")
    found = metadata_digest(parsed)
    digest = found[1] if found is not None and found[0] in DIGEST_ALGORITHMS else None
    provenance = None
    if getattr(parsed, "provenance", None) is not None:
        builder = parsed.provenance.kernel_builder
        source = parsed.provenance.kernel
        provenance = Provenance(
            builder_version=builder.version,
            builder_commit=_text(builder.git.commit)
            if builder.git
            else None,  # an `Oid` from kernels 0.18
            builder_dirty=builder.git.dirty if builder.git else None,
            source_commit=_text(source.commit) if source else None,
            source_dirty=source.dirty if source else None,
        )
    return VariantMetadata(
        depends=tuple(sorted(keys)),
        archs=metadata_archs(parsed),
        kernels_minver=_kernels_minver(parsed, metadata),
        python_depends=tuple(parsed.python_depends),
        digest=digest,
        digest_algorithm=found[0] if digest is not None and found is not None else None,
        provenance=provenance,
    )


def _kernels_minver(parsed: Any, raw: bytes) -> str | None:
    """The variant's `kernels-minver`: parsed by kernels 0.17+, read from the JSON by 0.16's
    loader (its `Metadata` has no such field)."""
    if hasattr(parsed, "kernels_minver"):
        return str(parsed.kernels_minver) if parsed.kernels_minver is not None else None
    import json

    value = json.loads(raw).get("kernels-minver")
    return value if isinstance(value, str) else None


# Files a variant's digest leaves out (kernels' `Digest.hash_variant`): the metadata, its signature,
# bytecode.
UNDIGESTED = ("metadata.json", "metadata.json.sigstore")


def digest_mismatches(
    digest: dict[str, str],
    files: tuple[LockedFile, ...],
    algorithm: str = "sha256",
    read: Callable[[str], bytes | None] | None = None,
) -> list[str]:
    """Files on which a metadata digest (base64 of `algorithm`) and the locked files disagree,
    either way.

    A file the digest lists with another hash or that is not locked, and a locked
    file the digest does not list, both count: kernels 0.18+ refuses to load either.
    A sha256 digest is compared with the locked hashes; another algorithm (sha512) with
    the hash of each file's bytes that `read(path)` returns. A file it cannot read (an LFS
    file when locking) is compared by path only here, and is hashed where it is loaded.
    """
    import base64
    import hashlib

    by_path = {
        f.path: f.sha256
        for f in files
        if f.path not in UNDIGESTED and "__pycache__" not in f.path.split("/")
    }
    mismatched = []
    for path, encoded in sorted(digest.items()):
        try:
            expected = base64.b64decode(encoded, validate=True)
        except ValueError:
            mismatched.append(path)
            continue
        if algorithm == "sha256":
            if by_path.get(path) != expected.hex():
                mismatched.append(path)
        elif (
            path not in by_path
            or read is not None
            and (content := read(path)) is not None
            and hashlib.new(algorithm, content).digest() != expected
        ):
            mismatched.append(path)
    return mismatched + sorted(set(by_path) - set(digest))


def digest_problem(
    metadata: Any, files: tuple[LockedFile, ...], root: Path | None = None
) -> str | None:
    """Why a parsed `metadata.json`'s digest disagrees with the locked files, or None when it agrees
    (or is absent).

    `root`: the verified variant directory, whose files a sha512 digest is checked against.
    """
    found = metadata_digest(metadata)
    if found is None:
        return None
    algorithm, digest = found
    if algorithm not in DIGEST_ALGORITHMS:
        return f"its metadata digest uses {algorithm}, which this kernlock cannot check"
    read = (
        (lambda path: (root / path).read_bytes())
        if root is not None and algorithm != "sha256"
        else None
    )
    mismatched = digest_mismatches(digest, files, algorithm, read)
    if not mismatched:
        return None
    more = f" and {len(mismatched) - 3} more" if len(mismatched) > 3 else ""
    return f"metadata.json's digest disagrees with the files ({', '.join(mismatched[:3])}{more})"


def cached_digest_problem(directory: Path, files: tuple[LockedFile, ...]) -> str | None:
    """`digest_problem` for a variant directory whose files match the lock: its own metadata.json's
    digest against them.

    What a lock cannot check without downloading (a sha512 digest of LFS files), checked where the
    files are.
    """
    try:
        metadata = variant_metadata((directory / "metadata.json").read_bytes())
    except (OSError, ValueError) as error:
        return f"its metadata.json cannot be read ({error})"
    return digest_problem(metadata, files, directory)


def archs_problem(
    variant: LockedVariant, metadata: bytes, lock_version: str, where: str
) -> str | None:
    """How a variant's locked `archs` differ from what its locked `metadata.json` (`where`: at a
    commit, in a directory) lists, or None.

    A lock before format 1.3 records no archs: an empty `archs` there is not compared.
    """
    import json

    if not variant.archs and format_version(lock_version) < (1, 3):
        return None
    try:
        listed = metadata_archs(variant_metadata(metadata))
    except ValueError:  # an unparsable metadata.json is refused where it is locked and loaded
        return None
    if listed == variant.archs:
        return None
    return (
        f"{variant.name}: the lock records archs {json.dumps(list(variant.archs))}, but its "
        f"metadata.json {where} lists {json.dumps(list(listed))}"
    )


def cached_license(kernel: LockedKernel, variant: LockedVariant) -> str | None:
    """The `license` of a locked variant's `metadata.json` in the Hub cache, when the cached file is
    the locked one (its sha256); None when it is not cached, differs, or names no license. Offline:
    the lock does not record the license, and nothing is asked of the Hub."""
    import hashlib
    import json

    from kernlock._internal.store.hub_cache import variant_dir

    locked = next((f for f in variant.files if f.path == "metadata.json"), None)
    if locked is None:
        return None
    path = variant_dir(kernel, variant.name) / "metadata.json"
    try:
        # the locked size first: a file swapped for a huge one is not read
        data = path.read_bytes() if path.stat().st_size == locked.size else b""
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != locked.sha256:
        return None
    try:
        found = json.loads(data).get("license")
    except (ValueError, RecursionError, AttributeError):
        return None
    return found.strip() if isinstance(found, str) and found.strip() else None
