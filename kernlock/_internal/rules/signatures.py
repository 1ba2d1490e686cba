"""Verify a variant's `metadata.json.sigstore` bundle offline, against a pinned Sigstore trusted
root.

sigstore-python's `Verifier` checks the leaf certificate's chain to the root's Fulcio CAs at the
log's signed time, its embedded SCT against the root's CT logs, the Rekor entry's inclusion proof,
signed checkpoint and inclusion promise, and the signature over `metadata.json`. The root is read
from a file (`Verifier(trusted_root=TrustedRoot.from_file(...))`), never refreshed through TUF, so
verification needs no network. sigstore is imported on the first verification only.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from kernlock._internal.lockfile.entries import LockedVariant, Signature
from kernlock.errors import SignatureError

TRUSTED_ROOT_ENV = "KERNLOCK_SIGSTORE_TRUSTED_ROOT"
_PRODUCTION = ("_store", "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev", "trusted_root.json")
_FULCIO = "1.3.6.1.4.1.57264.1."
_ISSUER_V1, _ISSUER_V2, _BUILD_SIGNER, _SOURCE_REPOSITORY, _SOURCE_COMMIT = 1, 8, 9, 12, 13
ANOTHER_REVISION = (
    "do not lock this build: lock another revision, or, for a private Sigstore, set "
    "[tool.kernlock] sigstore-trusted-root"
)
"""The fix of a bundle that does not verify (a tampered or mixed build, or one signed under another
root)."""


def production_trusted_root() -> Path:
    """The production Sigstore `trusted_root.json` shipped inside the sigstore package (found
    without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("sigstore")
    if spec is None or spec.origin is None:
        raise SignatureError(
            "sigstore is not installed, and verifying signatures needs it",
            fix="`pip install 'sigstore>=4,<5'`",
        )
    return Path(spec.origin).parent.joinpath(*_PRODUCTION)


def trusted_root_path(configured: Path | None = None) -> Path:
    """The root to verify against: `configured` ([tool.kernlock] sigstore-trusted-root), else
    $KERNLOCK_SIGSTORE_TRUSTED_ROOT, else the production root."""
    if configured is not None:
        return _refuse_shared_root(configured, "[tool.kernlock] sigstore-trusted-root")
    if os.environ.get(TRUSTED_ROOT_ENV):
        return _refuse_shared_root(Path(os.environ[TRUSTED_ROOT_ENV]), f"${TRUSTED_ROOT_ENV}")
    return production_trusted_root()


def _refuse_shared_root(path: Path, named: str) -> Path:
    """`path`, unless someone else controls it: another user's (not root's), writable by others, or
    in a directory others can write without the sticky bit (they can rename another file over it).
    Whoever can change the trusted root decides whose signatures count as a publisher's."""
    import stat

    from kernlock._internal.project.config import unsafe_reason

    try:
        mode = path.stat().st_mode
        reason = unsafe_reason(path)
    except OSError:
        return path  # missing or unreadable: `_verifier` says so
    if reason is None and mode & (stat.S_IWGRP | stat.S_IWOTH):
        reason = f"it is writable by {'its group' if mode & stat.S_IWGRP else 'every user'}"
    if reason is None:
        folder = path.resolve().parent.stat().st_mode
        if folder & (stat.S_IWGRP | stat.S_IWOTH) and not folder & stat.S_ISVTX:
            who = "its group" if folder & stat.S_IWGRP else "every user"
            reason = f"its directory is writable by {who}"
    if reason is None:
        return path
    raise SignatureError(
        f"refusing the Sigstore trusted root {path} (named by {named}): {reason}, so someone else "
        "decides whose signatures count as a publisher's; nothing was verified against it",
        fix=f"review it and keep your own copy (`install -D -m 644 {path} "
        f"~/.config/kernlock/trusted_root.json`), then point {named} at the copy, or unset it for "
        "the production root",
    )


@functools.cache
def _verifier(path: str) -> Any:
    from sigstore.models import TrustedRoot
    from sigstore.verify import Verifier

    try:
        return Verifier(trusted_root=TrustedRoot.from_file(path))
    except (OSError, ValueError) as error:
        raise SignatureError(
            f"cannot read the Sigstore trusted root {path} ({error})",
            fix=f"correct [tool.kernlock] sigstore-trusted-root or ${TRUSTED_ROOT_ENV}, or "
            "unset them to use the production root",
        ) from None


def _extension(certificate: Any, number: int, der: bool) -> str | None:
    from cryptography.hazmat import asn1
    from cryptography.x509 import ExtensionNotFound, ObjectIdentifier

    try:
        value = certificate.extensions.get_extension_for_oid(
            ObjectIdentifier(f"{_FULCIO}{number}")
        ).value.value
    except ExtensionNotFound:
        return None
    return asn1.decode_der(str, value) if der else value.decode()


def certificate_identity(certificate: Any) -> tuple[str, str, str | None, str | None]:
    """(issuer, build signer URI, source repository URI, source commit) of a Fulcio leaf
    certificate.

    The build signer falls back to the certificate's SAN URI (certificates from before Fulcio's v2
    extensions); the issuer is the v2 extension, else v1, and the two must agree when both are
    present.
    """
    from cryptography.x509 import SubjectAlternativeName, UniformResourceIdentifier

    v1, v2 = _extension(certificate, _ISSUER_V1, False), _extension(certificate, _ISSUER_V2, True)
    if v1 is not None and v2 is not None and v1 != v2:
        raise SignatureError(
            f"the certificate's OIDC issuer extensions disagree ({v1} and {v2})",
            fix=ANOTHER_REVISION,
        )
    signer = _extension(certificate, _BUILD_SIGNER, True)
    if signer is None:
        try:
            names = certificate.extensions.get_extension_for_class(SubjectAlternativeName).value
            signer = next(iter(names.get_values_for_type(UniformResourceIdentifier)), None)
        except Exception:
            signer = None
    return (
        v2 or v1 or "unknown issuer",
        signer or "unknown signer",
        _extension(certificate, _SOURCE_REPOSITORY, True),
        _extension(certificate, _SOURCE_COMMIT, True),
    )


class _Recorder:
    """A sigstore `VerificationPolicy` that accepts any identity: kernlock checks it after
    verification, with its own messages (`kernlock._internal.project.signers`)."""

    def verify(self, certificate: Any) -> None:
        return None


def verify_bundle(metadata: bytes, bundle: bytes, trusted_root: Path) -> Signature:
    """Verify `bundle` (a Sigstore bundle's JSON) over `metadata` against `trusted_root`; return who
    signed it.

    Raises `SignatureError` with sigstore's reason (and the identity the certificate claims) when it
    does not verify.
    """
    from sigstore.errors import Error as SigstoreError
    from sigstore.models import Bundle

    verifier = _verifier(str(trusted_root))
    try:
        parsed = Bundle.from_json(bundle)
    except SigstoreError as error:
        raise SignatureError(
            f"the bundle is not a valid Sigstore bundle ({_first_line(error)})",
            fix=ANOTHER_REVISION,
        ) from None
    issuer, signer, repository, commit = certificate_identity(parsed.signing_certificate)
    try:
        verifier.verify_artifact(metadata, parsed, _Recorder())
    except SigstoreError as error:
        raise SignatureError(
            f"the signature does not verify against the Sigstore trusted root {trusted_root} "
            f"({_first_line(error)}; the certificate claims {signer})",
            fix=ANOTHER_REVISION,
        ) from None
    entry = parsed.log_entry._inner
    return Signature(
        issuer=issuer,
        build_signer=signer,
        source_repository=repository,
        source_commit=commit,
        log_index=int(entry.log_index),
        integrated_time=int(entry.integrated_time or 0),
    )


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def root_fix(trusted_root: Path) -> str:
    """The fix for a locked bundle that no longer verifies against `trusted_root`."""
    return (
        "verify against the Sigstore root the lock was made with: point [tool.kernlock] "
        f"sigstore-trusted-root or ${TRUSTED_ROOT_ENV} at it (now {trusted_root}), or unset both "
        "for the production root"
    )


def recheck(
    repo: str, variant: LockedVariant, metadata: bytes, bundle: bytes, trusted_root: Path
) -> tuple[str, str] | None:
    """(problem, fix) when `bundle` no longer backs the signer the lock records for `variant`; None
    when it does."""
    where, relock = f"{repo} {variant.name}", f"kernlock lock -P {repo}"
    recorded = variant.signature
    if recorded is None:
        return (
            f"{where}: the lock records no signer for it (written before lock format 1.1)",
            relock,
        )
    try:
        found = verify_bundle(metadata, bundle, trusted_root)
    except SignatureError as error:
        return f"{where}: {error.message}", (
            error.fix if error.fix and error.fix != ANOTHER_REVISION else root_fix(trusted_root)
        )
    if found != recorded:
        return (
            f"{where}: the bundle names {found.build_signer} (log index {found.log_index}, "
            f"integrated {found.integrated_time}), but the lock records {recorded.build_signer} "
            f"(log index {recorded.log_index}, integrated {recorded.integrated_time})"
        ), relock
    return None
