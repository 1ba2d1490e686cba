"""A variant's signature at lock time: its Sigstore bundle over metadata.json, verified offline against the pinned
trust root and the project's signer policy, and the signed digest checked against the variant's files."""

from __future__ import annotations

from collections.abc import Callable

from kernlock._internal.lockfile.model import SIGNATURE_FILE, LockedFile, Signature
from kernlock._internal.project.signers import SigningPolicy
from kernlock._internal.store.metadata import digest_mismatches
from kernlock.errors import SignatureError


def variant_signature(signing: SigningPolicy, repo: str, variant: str, files: tuple[LockedFile, ...],
                      metadata: bytes | None, bundle: bytes | None) -> Signature | None:
    """Verify a variant's bundle over its metadata.json (pinned trust root, no network) and check its signer."""
    if not any(f.path == SIGNATURE_FILE for f in files):
        signing.check(repo, variant, None)
        return None
    if metadata is None or bundle is None:
        raise SignatureError(f"{repo} {variant}: ships {SIGNATURE_FILE} but {'metadata.json' if metadata is None else 'it'} "
                             "is not a small git file kernlock can read; it cannot be verified: lock another revision")
    from kernlock._internal.check.signatures import trusted_root_path, verify_bundle

    try:
        signature = verify_bundle(metadata, bundle, trusted_root_path(signing.trusted_root))
    except SignatureError as error:
        raise SignatureError(f"{repo} {variant}: {error}; do not lock this build: lock another revision, or, "
                             "for a private Sigstore, set [tool.kernlock] sigstore-trusted-root") from None
    signing.check(repo, variant, signature)
    return signature


def check_signed_digest(repo: str, variant: str, digest: dict[str, str] | None, files: tuple[LockedFile, ...],
                         algorithm: str | None = "sha256", read: Callable[[str], bytes | None] | None = None) -> None:
    """A signed metadata.json's digest must name every other file of the variant with its hash (kernels' check)."""
    if digest is None:
        raise SignatureError(f"{repo} {variant}: its signed metadata.json has no digest of the variant's files, so the "
                             "signature covers none of them; lock another revision")
    covered = {"metadata.json", SIGNATURE_FILE, *digest}
    wrong = [*digest_mismatches(digest, files, algorithm or "sha256", read), *(f.path for f in files if f.path not in covered)]
    if wrong:
        raise SignatureError(f"{repo} {variant}: the files disagree with the digest in its signed metadata.json "
                             f"({', '.join(sorted(wrong)[:3])}{'…' if len(wrong) > 3 else ''}); the commit may mix builds "
                             "or have been tampered with: lock another revision")
