"""The bytes of a fixture build's files: deterministic ZIP archives, the prebuilt native library,
`metadata.json.sigstore` bundles from the test Sigstore, and stand-in binaries.

`kernlock.testing.fixtures` renders fixture commits from these.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def template_sources(templates_dir: Path, template: str) -> dict[str, bytes]:
    """The Python sources of a fixture template: `common/*.py`, then the template's own."""
    paths = [*(templates_dir / "common").glob("*.py"), *(templates_dir / template).glob("*.py")]
    return {p.name: p.read_bytes() for p in paths}


def backend_metadata(variant: str, archs: list[str] | None = None) -> dict[str, Any]:
    """The metadata.json ``backend`` of a variant name (noarch ``universal`` builds are CPU);
    `archs` replaces a GPU build's default architectures."""
    for part in variant.split("-"):
        # new-style `cuda-12.8`, legacy `cu128`
        if part == "cuda" or (part.startswith("cu") and part[2:].isdigit()):
            return {"type": "cuda", "archs": list(archs) if archs is not None else ["8.0", "9.0"]}
        if part.startswith("rocm"):
            return {"type": "rocm", "archs": list(archs) if archs is not None else ["gfx942"]}
        if part.startswith("xpu"):
            return {"type": "xpu"}
        if part == "metal":
            return {"type": "metal"}
    return {"type": "cpu"}
