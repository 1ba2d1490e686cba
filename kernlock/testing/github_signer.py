"""The signer of the test Sigstore: a GitHub Actions workflow identity, as kernel-builder's signing
workflows present it to Fulcio (issuer, workflow URI, source repository, ref and digest).

`kernlock.testing.sigstore.TestSigstore` signs as one of these.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography import x509

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
KERNELS_COMMUNITY_BUILD = (
    "https://github.com/huggingface/kernels-community/.github/workflows/build.yaml@refs/heads/main"
)
_FULCIO = "1.3.6.1.4.1.57264.1."
_V1 = {
    "issuer": 1,
    "trigger": 2,
    "sha": 3,
    "name": 4,
    "repository": 5,
    "ref": 6,
}  # raw-bytes extensions
_V2 = {
    "issuer": 8,
    "signer": 9,
    "signer_digest": 10,
    "runner": 11,
    "source_repository": 12,
    "source_commit": 13,
    "source_ref": 14,
    "build_config": 18,
}  # DER UTF8String extensions


@dataclass(frozen=True)
class GitHubSigner:
    """The GitHub Actions identity a leaf certificate carries (what Fulcio copies from the OIDC
    token)."""

    # build signer URI: https://github.com/<org>/<repo>/<path>@<ref>
    workflow: str = KERNELS_COMMUNITY_BUILD
    # default: the workflow's own repository (a fork or caller differs)
    source_repository: str | None = None
    source_ref: str | None = None  # default: the workflow's ref
    source_commit: str = "5" * 40
    issuer: str = GITHUB_ISSUER

    @property
    def repository_uri(self) -> str:
        """The certificate's source repository URI."""
        return self.source_repository or "/".join(self.workflow.split("/")[:5])

    @property
    def ref(self) -> str:
        """The certificate's source repository ref."""
        return self.source_ref or self.workflow.rpartition("@")[2]

    @classmethod
    def from_certificate(cls, certificate: x509.Certificate) -> GitHubSigner:
        """The identity a leaf certificate (`_leaf`'s) carries, read back from its Fulcio v2
        extensions."""

        def value(name: str) -> str:
            extension = certificate.extensions.get_extension_for_oid(
                x509.ObjectIdentifier(f"{_FULCIO}{_V2[name]}")
            )
            raw: bytes = extension.value.value  # type: ignore[attr-defined]  # an UnrecognizedExtension
            return raw[2:].decode()  # a short DER UTF8String: tag, length, text

        return cls(
            workflow=value("signer"),
            source_repository=value("source_repository"),
            source_ref=value("source_ref"),
            source_commit=value("source_commit"),
            issuer=value("issuer"),
        )

    def extensions(self) -> dict[str, str]:
        """Fulcio's extension values by name (`_V1`, `_V2`)."""
        repository = self.repository_uri.removeprefix("https://github.com/")
        return {
            "issuer": self.issuer,
            "trigger": "push",
            "sha": self.source_commit,
            "name": "Build",
            "repository": repository,
            "ref": self.ref,
            "signer": self.workflow,
            "signer_digest": self.source_commit,
            "runner": "github-hosted",
            "source_repository": self.repository_uri,
            "source_commit": self.source_commit,
            "source_ref": self.ref,
            "build_config": self.workflow,
        }
