"""The bytes of a fixture build's files: deterministic ZIP archives, the prebuilt native library,
`metadata.json.sigstore` bundles from the test Sigstore, and stand-in binaries.

`kernlock.testing.fixtures` renders fixture commits from these.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path

from kernlock.testing.github_signer import GitHubSigner
from kernlock.testing.sigstore import TestSigstore


def zip_archive(files: Mapping[str, bytes]) -> bytes:
    """A deterministic ZIP archive of `files` (fixed dates and order)."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            archive.writestr(info, content)
    return buffer.getvalue()


def native_library(folder: Path) -> Path:
    """The one prebuilt ``*.abi3.so`` in ``folder`` (see its build script)."""
    [library] = sorted(folder.glob("*.abi3.so"))
    return library


def bundle(
    metadata: bytes, signed: bool | Mapping[str, str], sigstores: dict[str, TestSigstore]
) -> bytes:
    """A real ``metadata.json.sigstore`` over ``metadata`` from the test Sigstore, as ``signed``
    says (see the module)."""
    options = dict(signed) if isinstance(signed, Mapping) else {}
    seed = options.pop("seed", TestSigstore.seed)
    sigstore = sigstores.setdefault(seed, TestSigstore(seed=seed))
    return sigstore.sign(
        metadata, GitHubSigner(**{key.replace("-", "_"): value for key, value in options.items()})
    )


def fake_binary(seed: str) -> bytes:
    """Deterministic, incompressible ELF-looking bytes of 2-32 KiB."""
    rng = random.Random(seed)
    return b"\x7fELF\x02\x01\x01\x00" + rng.randbytes(rng.randint(2048, 32 * 1024))
