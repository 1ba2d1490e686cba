"""A test Sigstore: its own Fulcio root and intermediate, CT log, Rekor log and `trusted_root.json`.

It signs as kernel-builder's GitHub Actions workflows do on the real Sigstore: a short-lived
Fulcio-style leaf certificate carrying the GitHub Actions OIDC extensions (issuer v1 and v2, build
signer URI, source repository URI, ref and digest) and an embedded SCT from its CT log, and a
hashedrekord 0.0.1 entry in its Rekor log with an inclusion proof, a signed checkpoint and an
inclusion promise (SET), in a v0.3 bundle that sigstore-python's `Verifier` checks like any other.

Keys derive from a seed and ECDSA signatures are deterministic (RFC 6979), so the same signing
sequence gives the same bytes on every machine (fixture repos keep their commit SHAs). The log is
an append-only RFC 6962 Merkle tree held in memory, started with a few unrelated entries so that
inclusion proofs have real paths.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kernlock.testing.github_signer import _FULCIO, _V1, _V2, GitHubSigner

# the CAs' and logs' validity start
START = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_SCT_OID = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")


def _key(seed: str, name: str, curve: ec.EllipticCurve) -> ec.EllipticCurvePrivateKey:
    number = (
        int.from_bytes(hashlib.sha256(f"{seed}/{name}".encode()).digest(), "big")
        % (_P256_ORDER - 1)
        + 1
    )
    return ec.derive_private_key(number, curve)


def _spki(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    return key.sign(data, ec.ECDSA(hashes.SHA256(), deterministic_signing=True))


def _der(tag: int, content: bytes) -> bytes:
    """A DER TLV (definite length)."""
    if len(content) < 0x80:
        return bytes([tag, len(content)]) + content
    size = len(content).to_bytes((len(content).bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def _serial(*parts: object) -> int:
    return (
        int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:16], "big") >> 1
        | 1
    )


def _time(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


# ---------------------------------------------------------------- RFC 6962 Merkle tree


def _leaf_hash(body: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + body).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two below `size`."""
    return 1 << ((size - 1).bit_length() - 1)


def _root(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return _node(_root(leaves[:k]), _root(leaves[k:]))


def _path(index: int, leaves: list[bytes]) -> list[bytes]:
    """The inclusion proof of leaf `index`, lowest level first."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*_path(index, leaves[:k]), _root(leaves[k:])]
    return [*_path(index - k, leaves[k:]), _root(leaves[:k])]


# ---------------------------------------------------------------- the instance


@dataclass
class TestSigstore:
    """A private Sigstore instance: `sign()` bundles, `trusted_root()` the root of trust that
    verifies them."""

    __test__ = False  # not a pytest test class

    seed: str = "kernlock test sigstore"
    name: str = "kernlock.invalid"
    _leaves: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root_key = _key(self.seed, "fulcio-root", ec.SECP384R1())
        self.intermediate_key = _key(self.seed, "fulcio-intermediate", ec.SECP384R1())
        self.ct_key = _key(self.seed, "ctlog", ec.SECP256R1())
        self.rekor_key = _key(self.seed, "rekor", ec.SECP256R1())
        self.root_cert = self._ca("root", self.root_key, self.root_key, None)
        self.intermediate_cert = self._ca(
            "intermediate", self.intermediate_key, self.root_key, self.root_cert
        )
        self._leaves = [_leaf_hash(f"{self.seed} unrelated entry {i}".encode()) for i in range(5)]

    def _ca(
        self,
        role: str,
        key: ec.EllipticCurvePrivateKey,
        issuer_key: ec.EllipticCurvePrivateKey,
        issuer: x509.Certificate | None,
    ) -> x509.Certificate:
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, self.name),
                x509.NameAttribute(NameOID.COMMON_NAME, f"{self.name} fulcio {role}"),
            ]
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer.subject if issuer else subject)
            .public_key(key.public_key())
            .serial_number(_serial(self.seed, role))
            .not_valid_before(START)
            .not_valid_after(START + datetime.timedelta(days=3650))
            .add_extension(
                x509.BasicConstraints(ca=True, path_length=None if issuer is None else 0),
                critical=True,
            )
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                critical=False,
            )
        )
        if issuer is not None:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False
            )
        return builder.sign(issuer_key, hashes.SHA384(), ecdsa_deterministic=True)

    # ---------------------------------------------------------------- trusted root

    def trusted_root(self) -> dict:
        """The `trusted_root.json` document (Sigstore's TrustedRoot v0.1) of this instance."""

        def log(url: str, key: ec.EllipticCurvePrivateKey) -> dict:
            spki = _spki(key.public_key())
            return {
                "baseUrl": url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": base64.b64encode(spki).decode(),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": _time(START)},
                },
                "logId": {"keyId": base64.b64encode(hashlib.sha256(spki).digest()).decode()},
            }

        chain = [self.intermediate_cert, self.root_cert]
        return {
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [log(f"https://rekor.{self.name}", self.rekor_key)],
            "certificateAuthorities": [
                {
                    "subject": {"organization": self.name, "commonName": f"{self.name} fulcio"},
                    "uri": f"https://fulcio.{self.name}",
                    "certChain": {
                        "certificates": [
                            {
                                "rawBytes": base64.b64encode(
                                    c.public_bytes(serialization.Encoding.DER)
                                ).decode()
                            }
                            for c in chain
                        ]
                    },
                    "validFor": {"start": _time(START)},
                }
            ],
            "ctlogs": [log(f"https://ctfe.{self.name}", self.ct_key)],
            "timestampAuthorities": [],
        }

    def write_trusted_root(self, path: Path) -> Path:
        """Write `trusted_root()` to `path` (its directory created); return `path`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.trusted_root(), indent=2) + "\n")
        return path

    # ---------------------------------------------------------------- signing

    def _leaf(
        self, key: ec.EllipticCurvePrivateKey, signer: GitHubSigner, when: datetime.datetime
    ) -> x509.Certificate:
        """A Fulcio-style leaf certificate for `signer`, valid ten minutes from `when`, with an
        embedded SCT."""
        values = signer.extensions()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.intermediate_cert.subject)
            .public_key(key.public_key())
            .serial_number(_serial(self.seed, "leaf", len(self._leaves)))
            .not_valid_before(when)
            .not_valid_after(when + datetime.timedelta(minutes=10))
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    self.intermediate_key.public_key()
                ),
                critical=False,
            )
            .add_extension(
                x509.SubjectAlternativeName([x509.UniformResourceIdentifier(signer.workflow)]),
                critical=True,
            )
        )
        for name, number in _V1.items():
            builder = builder.add_extension(
                x509.UnrecognizedExtension(
                    x509.ObjectIdentifier(f"{_FULCIO}{number}"), values[name].encode()
                ),
                critical=False,
            )
        for name, number in _V2.items():
            builder = builder.add_extension(
                x509.UnrecognizedExtension(
                    x509.ObjectIdentifier(f"{_FULCIO}{number}"), _der(0x0C, values[name].encode())
                ),
                critical=False,
            )
        precert = builder.sign(self.intermediate_key, hashes.SHA384(), ecdsa_deterministic=True)
        sct = self._sct(precert.tbs_certificate_bytes, when)
        certificate = builder.add_extension(
            x509.UnrecognizedExtension(_SCT_OID, _der(0x04, sct)), critical=False
        ).sign(self.intermediate_key, hashes.SHA384(), ecdsa_deterministic=True)
        assert certificate.tbs_precertificate_bytes == precert.tbs_certificate_bytes
        return certificate

    def _sct(self, tbs: bytes, when: datetime.datetime) -> bytes:
        """The TLS-encoded SignedCertificateTimestampList (RFC 6962 §3.3) of one precertificate SCT
        from the CT log."""
        log_id = hashlib.sha256(_spki(self.ct_key.public_key())).digest()
        issuer_key_hash = hashlib.sha256(_spki(self.intermediate_key.public_key())).digest()
        millis = int(when.timestamp() * 1000)
        signed = (
            struct.pack("!BBQH", 0, 0, millis, 1)
            + issuer_key_hash
            + len(tbs).to_bytes(3, "big")
            + tbs
            + struct.pack("!H", 0)
        )
        signature = _sign(self.ct_key, signed)
        sct = (
            struct.pack("!B", 0)
            + log_id
            + struct.pack("!QH", millis, 0)
            + struct.pack("!BBH", 4, 3, len(signature))
            + signature
        )
        return struct.pack("!HH", len(sct) + 2, len(sct)) + sct

    def resign(self, bundle: bytes, artifact: bytes) -> bytes:
        """A publisher's rebuild: a bundle over `artifact` by the identity that signed `bundle`,
        logged after it.

        `bundle` must come from this instance (the same seed). The new entry comes after the old one
        in the log (unrelated entries fill the gap) and an hour later.
        """
        document = json.loads(bundle)
        certificate = x509.load_der_x509_certificate(
            base64.b64decode(document["verificationMaterial"]["certificate"]["rawBytes"])
        )
        # raises unless this instance issued it
        certificate.verify_directly_issued_by(self.intermediate_cert)
        entry = document["verificationMaterial"]["tlogEntries"][0]
        while len(self._leaves) <= int(entry["logIndex"]):
            self._leaves.append(
                _leaf_hash(f"{self.seed} unrelated entry {len(self._leaves)}".encode())
            )
        when = datetime.datetime.fromtimestamp(
            int(entry["integratedTime"]) + 3600, datetime.timezone.utc
        )
        return self.sign(artifact, GitHubSigner.from_certificate(certificate), when)

    def sign(
        self,
        artifact: bytes,
        signer: GitHubSigner = GitHubSigner(),
        when: datetime.datetime | None = None,
    ) -> bytes:
        """A Sigstore v0.3 bundle (JSON bytes) over `artifact`, signed as `signer` at `when` and
        logged."""
        when = when or START + datetime.timedelta(days=365, seconds=len(self._leaves))
        key = _key(
            self.seed,
            f"leaf/{len(self._leaves)}/{hashlib.sha256(artifact).hexdigest()}",
            ec.SECP256R1(),
        )
        certificate = self._leaf(key, signer, when)
        digest = hashlib.sha256(artifact).digest()
        signature = _sign(key, artifact)
        pem = certificate.public_bytes(serialization.Encoding.PEM)
        body = rfc8785.dumps(
            {
                "apiVersion": "0.0.1",
                "kind": "hashedrekord",
                "spec": {
                    "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
                    "signature": {
                        "content": base64.b64encode(signature).decode(),
                        "publicKey": {"content": base64.b64encode(pem).decode()},
                    },
                },
            }
        )
        index = len(self._leaves)
        self._leaves.append(_leaf_hash(body))
        integrated = int(when.timestamp()) + 1
        log_id = hashlib.sha256(_spki(self.rekor_key.public_key())).digest()
        promise = _sign(
            self.rekor_key,
            rfc8785.dumps(
                {
                    "body": base64.b64encode(body).decode(),
                    "integratedTime": integrated,
                    "logID": log_id.hex(),
                    "logIndex": index,
                }
            ),
        )
        root = _root(self._leaves)
        note = (
            f"rekor.{self.name} - "
            f"{int.from_bytes(log_id[:8], 'big')}\n{len(self._leaves)}\n"
            f"{base64.b64encode(root).decode()}\n"
        )
        checkpoint = (
            note
            + f"\n\u2014 rekor.{self.name} "
            + base64.b64encode(log_id[:4] + _sign(self.rekor_key, note.encode())).decode()
            + "\n"
        )
        bundle = {
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {
                    "rawBytes": base64.b64encode(
                        certificate.public_bytes(serialization.Encoding.DER)
                    ).decode()
                },
                "tlogEntries": [
                    {
                        "logIndex": str(index),
                        "logId": {"keyId": base64.b64encode(log_id).decode()},
                        "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
                        "integratedTime": str(integrated),
                        "inclusionPromise": {
                            "signedEntryTimestamp": base64.b64encode(promise).decode()
                        },
                        "inclusionProof": {
                            "logIndex": str(index),
                            "rootHash": base64.b64encode(root).decode(),
                            "treeSize": str(len(self._leaves)),
                            "hashes": [
                                base64.b64encode(h).decode() for h in _path(index, self._leaves)
                            ],
                            "checkpoint": {"envelope": checkpoint},
                        },
                        "canonicalizedBody": base64.b64encode(body).decode(),
                    }
                ],
            },
            "messageSignature": {
                "messageDigest": {
                    "algorithm": "SHA2_256",
                    "digest": base64.b64encode(digest).decode(),
                },
                "signature": base64.b64encode(signature).decode(),
            },
        }
        return (json.dumps(bundle, indent=2) + "\n").encode()
