"""A variant's signature at lock time: its Sigstore bundle over metadata.json, verified offline
against the pinned trust root and the project's signer policy, and the signed digest checked against
the variant's files."""

from __future__ import annotations

from collections.abc import Callable

from kernlock._internal.hub.variants import TreeFile
from kernlock._internal.lockfile.entries import SIGNATURE_FILE, LockedFile, Lockfile, Signature
from kernlock._internal.project.signers import SigningPolicy
from kernlock._internal.store.metadata import digest_mismatches
from kernlock.errors import SignatureError


def variant_signature(
    signing: SigningPolicy,
    repo: str,
    variant: str,
    files: tuple[LockedFile, ...],
    metadata: bytes | None,
    bundle: bytes | None,
    expected: str | None = None,
) -> Signature | None:
    """Verify a variant's bundle over its metadata.json (pinned trust root, no network) and check
    its signer.

    `expected`: why a signature is expected of this build (`SigningPolicy.check` refuses it unsigned
    then)."""
    if not any(f.path == SIGNATURE_FILE for f in files):
        signing.check(repo, variant, None, expected=expected)
        return None
    if metadata is None or bundle is None:
        raise SignatureError(
            f"{repo} {variant}: ships {SIGNATURE_FILE} but "
            f"{'metadata.json' if metadata is None else 'it'} is not a small git file kernlock can "
            "read; it cannot be verified",
            fix=f"lock another revision ({repo}@<revision>)",
        )
    from kernlock._internal.rules.signatures import (
        ANOTHER_REVISION,
        trusted_root_path,
        verify_bundle,
    )

    try:
        signature = verify_bundle(metadata, bundle, trusted_root_path(signing.trusted_root))
    except SignatureError as error:
        raise SignatureError(
            f"{repo} {variant}: {error.message}", fix=error.fix or ANOTHER_REVISION
        ) from None
    signing.check(repo, variant, signature)
    return signature


def check_signed_digest(
    repo: str,
    variant: str,
    digest: dict[str, str] | None,
    files: tuple[LockedFile, ...],
    algorithm: str | None = "sha256",
    read: Callable[[str], bytes | None] | None = None,
) -> None:
    """A signed metadata.json's digest must name every other file of the variant with its hash
    (kernels' check)."""
    if digest is None:
        raise SignatureError(
            f"{repo} {variant}: its signed metadata.json has no digest of the variant's files, so "
            "the signature covers none of them",
            fix=f"lock another revision ({repo}@<revision>)",
        )
    covered = {"metadata.json", SIGNATURE_FILE, *digest}
    wrong = [
        *digest_mismatches(digest, files, algorithm or "sha256", read),
        *(f.path for f in files if f.path not in covered),
    ]
    if wrong:
        raise SignatureError(
            f"{repo} {variant}: the files disagree with the digest in its signed metadata.json "
            f"({', '.join(sorted(wrong)[:3])}{'…' if len(wrong) > 3 else ''}); the commit may mix "
            "builds or have been tampered with",
            fix=f"lock another revision ({repo}@<revision>)",
        )


def signature_expected(
    repo: str, commit: str, grouped: dict[str, list[TreeFile]], previous: Lockfile | None
) -> str | None:
    """Why a signature is expected of every build of `repo` at `commit`, or None: another build of
    the commit is signed, or the lock being replaced records a signed build of the repo (an unsigned
    one now is a downgrade)."""
    signed = sorted(
        name
        for name, files in grouped.items()
        if any(f.path == f"build/{name}/{SIGNATURE_FILE}" for f in files)
    )
    if signed:
        return f"{signed[0]} of the same commit {commit[:12]} is signed"
    if previous is not None:
        for entry in previous.kernels:
            if entry.repo == repo and any(v.signature is not None for v in entry.variants):
                return (
                    f"the lock being replaced records signed builds of {repo} ({entry.commit[:12]})"
                )
    return None
