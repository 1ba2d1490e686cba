"""`kernlock export --format cyclonedx`: the lock as a CycloneDX 1.6 SBOM, built and serialized by
cyclonedx-python-lib (the `sbom` extra); nothing of the document is written by hand.

One `library` component per locked variant (kernel entry × commit × variant), named by the purl

    pkg:huggingface/<org>/<repo>@<commit>?repo_type=kernel#build/<variant>

purl's `huggingface` type names a Hub repo at a commit (lower-case hex); it is defined for model
repos, so `repo_type=kernel` (huggingface_hub's own word, `repo_type="kernel"`) says the repo is a
kernel repo, and the subpath names the variant's folder, which keeps each variant's purl its own.
Each component holds one `file` component per locked file with its SHA-256, and properties
(`kernlock:variant`, one `kernlock:target` per target, one `kernlock:gpu-arch` per locked GPU
architecture, the spec, ref and the signer the lock records). The license is `metadata.json`'s,
read by the caller (`license_of`): the lock does not record it. A kernel's `depends` become the
BOM's dependency graph, target by target. The serial number is derived from the lock's contents, so
one lock gives one serial number.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant, Lockfile
from kernlock.errors import UsageError

if TYPE_CHECKING:
    from cyclonedx.model import Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component

LicenseOf = Callable[[LockedKernel, LockedVariant], str | None]
SUFFIX = ".cdx.json"  # CycloneDX's recommended file name ending
INSTALL_FIX = "pip install 'cyclonedx-python-lib>=11.12,<12'"  # kernlock's `sbom` extra


def purl_text(kernel: LockedKernel, variant: str) -> str:
    """The purl of a locked variant (see the module docstring)."""
    from packageurl import PackageURL

    org, name = kernel.repo.split("/", 1)
    return PackageURL(
        type="huggingface",
        namespace=org,
        name=name,
        version=kernel.commit,
        qualifiers={"repo_type": "kernel"},
        subpath=f"build/{variant}",
    ).to_string()


def _properties(kernel: LockedKernel, variant: LockedVariant) -> Iterator[Property]:
    from cyclonedx.model import Property

    pairs = [("spec", kernel.spec), ("ref", kernel.ref), ("resolution", kernel.resolution)]
    pairs += [("variant", variant.name), *(("target", str(t)) for t in variant.targets)]
    pairs += [("gpu-arch", arch) for arch in variant.archs]
    pairs += [("kernels-minver", variant.kernels_minver), ("digest", variant.digest)]
    pairs += [("override", kernel.override.when if kernel.override else None)]
    if (signer := variant.signature) is not None:
        pairs += [
            ("signer:issuer", signer.issuer),
            ("signer:build-signer", signer.build_signer),
            ("signer:source-repository", signer.source_repository),
            ("signer:source-commit", signer.source_commit),
            ("signer:log-index", str(signer.log_index)),
        ]
    for key, value in pairs:
        if value is not None:
            yield Property(name=f"kernlock:{key}", value=value)


def _component(kernel: LockedKernel, variant: LockedVariant, license_text: str | None) -> Component:
    from cyclonedx.contrib.license.factories import LicenseFactory
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.component import Component, ComponentType
    from packageurl import PackageURL

    purl = purl_text(kernel, variant.name)
    org, name = kernel.repo.split("/", 1)
    files = [
        Component(
            type=ComponentType.FILE,
            name=f.path,
            bom_ref=f"{purl}/{f.path}",
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=f.sha256)],
            properties=[Property(name="kernlock:size", value=str(f.size))],
        )
        for f in variant.files
    ]
    return Component(
        type=ComponentType.LIBRARY,
        group=org,
        name=name,
        version=kernel.commit,
        bom_ref=purl,
        purl=PackageURL.from_string(purl),
        licenses=[LicenseFactory().make_from_string(license_text)] if license_text else None,
        properties=_properties(kernel, variant),
        components=files,
    )


def lock_bom(lock: Lockfile, license_of: LicenseOf, serial: str) -> Bom:
    """The BOM of `lock`: a component per locked variant, its files, and what each depends on."""
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentType

    from kernlock._internal.distribution import version

    metadata = BomMetaData()
    metadata.tools.components.add(
        Component(type=ComponentType.APPLICATION, name="kernlock", version=version())
    )
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, serial), metadata=metadata)
    components: dict[tuple[str, str], Component] = {}
    for kernel in lock.kernels:
        for variant in kernel.variants:
            component = _component(kernel, variant, license_of(kernel, variant))
            components[(kernel.spec, variant.name)] = component
            bom.components.add(component)
    for kernel in lock.kernels:
        for variant in kernel.variants:
            needs = {
                components[(dep, found.name)]
                for dep in kernel.depends
                for target in variant.targets
                if (entry := lock.kernel(dep, target)) is not None
                and (found := entry.variant_for(target)) is not None
            }
            bom.register_dependency(components[(kernel.spec, variant.name)], needs)
    return bom


def cyclonedx_json(lock: Lockfile, license_of: LicenseOf) -> str:
    """The CycloneDX 1.6 JSON of `lock`."""
    try:
        from cyclonedx.output.json import JsonV1Dot6
    except ImportError:
        raise UsageError(
            "--format cyclonedx needs cyclonedx-python-lib, which is not installed",
            fix=INSTALL_FIX,
        ) from None
    import json

    contents = json.dumps(lock.to_dict(), sort_keys=True, default=str).encode("utf-8")
    serial = f"kernlock:{hashlib.sha256(contents).hexdigest()}"
    return JsonV1Dot6(lock_bom(lock, license_of, serial)).output_as_string(indent=2)


def looks_like_cyclonedx(data: bytes) -> bool:
    """Whether `data` is a CycloneDX JSON document (what `-o` may replace)."""
    import json

    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return False
    return isinstance(document, dict) and document.get("bomFormat") == "CycloneDX"
