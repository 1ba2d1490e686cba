"""`kernlock vendor --to oci://…` (or `oci-layout:DIR`): push the locked variants as OCI artifacts
(`kernlock._internal.oci.artifact`) and record the index's digest in the lock.

The variants are first synced into the Hub cache and verified there, as for a vendor directory; each
file is then uploaded once (a blob the store already holds is not sent again), each variant's
manifest by its digest, and the lock's index under the location's tag (default `latest`). The lock
is then rewritten, under the project's mutex, with a `[[mirror]]` record of the location and the
index digest; a lock whose pins changed meanwhile is left alone. With `--target` or `--group` the
index holds only those variants: a node pulls them with the same choice.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from kernlock._internal.fetch.sync import selected_variants, sync_variants
from kernlock._internal.lockfile.mirror_edit import with_mirror
from kernlock._internal.lockfile.serialize import write_lockfile
from kernlock._internal.oci.artifact import (
    EMPTY,
    EMPTY_DIGEST,
    INDEX_TYPE,
    MANIFEST_TYPE,
    digest_of,
    lock_index,
    variant_manifest,
)
from kernlock._internal.oci.store import open_store
from kernlock._internal.project.groups import select_groups
from kernlock._internal.project.workspace import exclusive_workspace, open_workspace
from kernlock._internal.spec.oci_ref import DEFAULT_TAG, parse_ref
from kernlock._internal.store.hub_cache import hub_cache_dir, variant_dir
from kernlock.errors import UsageError


@dataclass(frozen=True)
class PushReport:
    """What `push()` sent."""

    location: str  # with the index digest
    index: str
    variants: int
    files: int
    uploaded: int  # blobs sent (the others the store held already)
    bytes: int  # bytes sent

    def to_dict(self) -> dict[str, object]:
        """The report as JSON (`kernlock vendor --to … --json`)."""
        return {
            "location": self.location,
            "index": self.index,
            "variants": self.variants,
            "files": self.files,
            "uploaded": self.uploaded,
            "bytes": self.bytes,
        }


def push(
    destination: str,
    project_dir: str | os.PathLike[str] = ".",
    *,
    targets: Iterable[str] = (),
    lockfile: str | os.PathLike[str] | None = None,
    groups: Iterable[str] = (),
) -> PushReport:
    """Push the locked variants for `targets` (default: every locked target) to `destination` and
    record the pushed index in the lock; `groups` pushes only the ungrouped entries' variants and
    those of these groups (as `vendor(groups=...)`)."""
    ref = parse_ref(destination)  # before anything is downloaded or sent
    if ref.digest is not None:
        raise UsageError(
            f"{destination}: a push names a tag, not a digest (the digest is the index's own)",
            fix=f"drop @{ref.digest}: `kernlock vendor --to {ref.location}`",
        )
    workspace = open_workspace(project_dir, lockfile, readers=False)
    path, lock = workspace.lock_path, workspace.read_lock()
    targets = tuple(targets)
    chosen = select_groups(lock, groups, f"vendor --to {shlex.quote(destination)}")
    pairs = selected_variants(chosen, workspace.chosen_targets(chosen, targets, not targets))
    sync_variants(path, pairs)  # into the Hub cache, verified: the blobs are sent from there
    cache = hub_cache_dir()
    store = open_store(ref, push=True)
    sent: set[str] = set()
    uploaded = size = files = 0
    if not store.has_blob(EMPTY_DIGEST):
        store.put_blob(EMPTY_DIGEST, EMPTY)
    artifacts = []
    for kernel, variant in pairs:
        root = variant_dir(kernel, variant.name, cache)
        for locked in variant.files:
            files += 1
            digest = f"sha256:{locked.sha256}"
            if digest in sent:
                continue
            sent.add(digest)
            if not store.has_blob(digest):
                store.put_blob(digest, root / locked.path)
                uploaded, size = uploaded + 1, size + locked.size
        artifact = variant_manifest(kernel, variant)
        store.put_manifest(artifact.digest, artifact.body, MANIFEST_TYPE)
        artifacts.append(artifact)
    index = lock_index(artifacts)
    store.put_manifest(ref.tag or DEFAULT_TAG, index, INDEX_TYPE)
    digest = digest_of(index)
    with exclusive_workspace(project_dir, lockfile) as current:
        now = current.read_lock()
        if now.kernels != lock.kernels:
            raise UsageError(
                f"{current.lock_path} changed while its kernels were pushed to {ref.location}; "
                "the lock does not record that push",
                fix=f"push the new pins: `kernlock vendor --to {ref.location}`",
            )
        write_lockfile(with_mirror(now, ref.location, digest), current.lock_path)
    return PushReport(
        location=str(ref.at(digest)),
        index=digest,
        variants=len(pairs),
        files=files,
        uploaded=uploaded,
        bytes=size,
    )
