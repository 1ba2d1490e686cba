"""Locking one commit of a kernel: its trust, the variant chosen per target, the hash of every file.

`CommitLocker`, a part the resolver (`kernlock._internal.resolve.resolver.Resolver`) is given, turns
a commit (a `Pin`) into a `LockedKernel`, refusing a missing commit, a target without a variant, or
mixed digests; it keeps a previous entry where it is still complete.

Small (git, not LFS) files are fetched once per resolution by git blob id (`SmallFiles`): the same
blob in several variants, commits or repos is one request, and `Hub.fetch` checks the bytes against
the blob id. A variant's signature is its Sigstore bundle over metadata.json, verified offline
against the pinned trust root and the project's signer policy (`variant_signature`), with the
signed digest checked against the variant's files (`check_signed_digest`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

from kernlock._internal.host import interpreter
from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.responses import Ref, TreeFile
from kernlock._internal.hub.variants import choose_variant, group_variants, python_choices
from kernlock._internal.lockfile.entries import (
    SIGNATURE_FILE,
    LockedFile,
    LockedKernel,
    LockedVariant,
    Lockfile,
    Signature,
)
from kernlock._internal.lockfile.kernels_json import MIGRATED
from kernlock._internal.project.signers import SigningPolicy
from kernlock._internal.resolve.jobs import Job
from kernlock._internal.resolve.no_variant import (
    MissingBuild,
    missing_builds_error,
    no_variant_problem,
)
from kernlock._internal.resolve.request import ResolveOptions
from kernlock._internal.spec.target import Target
from kernlock._internal.store.metadata import digest_mismatches, read_variant_metadata
from kernlock.errors import ResolutionError, SignatureError, TrustError


@dataclass(frozen=True)
class Pin:
    """A commit of a repo to lock: the ref and version it came from, and the resolution it
    records."""

    repo: str
    commit: str
    ref: str | None
    version: int | None
    resolution: str

    @classmethod
    def of(cls, kernel: LockedKernel) -> Pin:
        """The pin a lock entry records."""
        return cls(kernel.repo, kernel.commit, kernel.ref, kernel.version, kernel.resolution)


class CommitLocker:
    """Locks commits of one resolution, reading small files through a pool of its own (`close`)."""

    def __init__(
        self,
        hub: Hub,
        options: ResolveOptions,
        previous: Lockfile | None,
        warnings: list[str],
        workers: int = 16,
    ) -> None:
        self.hub = hub
        self.options = options
        self.previous = previous  # the lock being replaced: whether a signature is expected
        self.warnings = warnings  # shared with the resolver's other parts, in the order said
        self._files = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kernlock-file")
        self._blobs = SmallFiles(hub, self._files)

    def close(self) -> None:
        """Stop the small-file pool (the resolution is over)."""
        self._files.shutdown(wait=True, cancel_futures=True)

    def _trust(self, repo: str) -> str:
        if repo in self.options.trust_allowlist:
            return "allowlist"
        if self.hub.publisher_trusted(repo.split("/", 1)[0]):
            return "trusted-publisher"
        raise TrustError.untrusted(repo)

    def keep(self, previous: LockedKernel, job: Job) -> LockedKernel:
        """The previous entry for the job's targets: kept as it is when complete, else locked again
        at its commit."""
        wanted = set(job.targets)
        have = {t for v in previous.variants for t in v.targets}
        complete = wanted <= have and (
            not self.options.all_variants
            or {v.name for v in previous.variants} >= set(previous.build_variants)
        )
        # a 1.0 lock: verify now
        verified = all(v.signature is not None or not v.signed for v in previous.variants)
        if (
            complete
            and verified
            and (previous.trust != "allowlist" or previous.repo in self.options.trust_allowlist)
        ):
            variants = tuple(
                replace(v, targets=tuple(t for t in v.targets if t in wanted))
                for v in previous.variants
                if self.options.all_variants or any(t in wanted for t in v.targets)
            )
            # the recorded signer against today's policy: no network, no sigstore
            for variant in variants:
                self.options.signing.check(previous.repo, variant.name, variant.signature)
            return replace(previous, variants=variants)
        fresh = self.lock(job, Pin.of(previous))
        return replace(fresh, aliases=previous.aliases)

    # Complexity 16: one pass over a commit whose refusals (missing commit, no variant, mixed
    # digests) must run in this order, before anything is hashed or written; split up, the order
    # would live in no one place.
    def lock(  # noqa: C901
        self, job: Job, pin: Pin, refs: list[Ref] | None = None
    ) -> LockedKernel:
        """The entry for `job` at `pin` (`refs`: the repo's, where already listed)."""
        spec_key = job.key
        repo, commit, ref, resolution = pin.repo, pin.commit, pin.ref, pin.resolution
        trust = self._trust(repo)
        try:
            listing = self.hub.tree(repo, commit)
        except ResolutionError as error:
            # the pin, not the Hub, is wrong
            if "revision not found" in str(error) and resolution.startswith(MIGRATED):
                raise ResolutionError(
                    f"{spec_key}: kernels' JSON lock pins {repo} to commit {commit[:12]}, which "
                    f"the Hub does not have ({commit}); nothing was written",
                    fix="correct or remove that pin in the JSON lock, then run `kernlock "
                    "lock --migrate` again",
                ) from None
            if ref is None or "revision not found" not in str(error):
                raise
            raise ResolutionError(
                f"{spec_key}: {ref} points at commit {commit[:12]}, which the Hub cannot list; the "
                "repository looks broken",
                fix=f"try again later, or pin another revision ({repo}@<revision>)",
            ) from None
        grouped = group_variants(repo, commit, listing)
        names = sorted(grouped)
        chosen: dict[str, set[Target]] = {}
        native: list[str] = []
        missing: list[MissingBuild] = []
        for target in job.targets:
            variant, reasons = choose_variant(names, target)
            if variant is None and job.devices:
                # only a model brings it in: Transformers keeps the layer's own code there
                native.append(f"{target}: no build for this target")
                self.warnings.append(
                    f"{spec_key} ({commit[:12]}) has no build for {target}: "
                    f"{', '.join(sorted(job.used_by)) or 'its layers'} keep Transformers' own "
                    "code there (recorded as native in the lock)"
                )
                continue
            if variant is None:  # every target is tried: the refusal names them all
                missing.append(
                    no_variant_problem(self.hub, spec_key, repo, commit, target, reasons, refs)
                )
                continue
            chosen.setdefault(variant, set()).add(target)
            if target.python is None:
                self._warn_python_dependent(spec_key, names, target, variant)
        if missing:
            raise missing_builds_error(missing)
        if self.options.all_variants:
            for name in names:
                chosen.setdefault(name, set())
        # every chosen variant's small files at once: one round of requests, not one per variant
        for name in chosen:
            for entry in grouped[name]:
                if entry.lfs_sha256 is None:
                    self._blobs.request(repo, commit, entry)
        variants = []
        depends: set[str] = set()
        expected = signature_expected(repo, commit, grouped, self.previous)
        for name in sorted(chosen):
            files, raw, bundle, contents = self._hash_variant(repo, commit, name, grouped[name])
            # the signature is checked before the metadata is parsed, as kernels does
            signature = variant_signature(
                self.options.signing,
                repo,
                name,
                files,
                raw,
                bundle,
                expected,
            )
            metadata = read_variant_metadata(repo, name, raw)
            digest = metadata.digest_algorithm
            if signature is not None:
                check_signed_digest(
                    repo, name, metadata.digest, files, metadata.digest_algorithm, contents.get
                )
            elif metadata.digest is not None:
                mismatched = digest_mismatches(
                    metadata.digest, files, metadata.digest_algorithm or "sha256", contents.get
                )
                if mismatched:  # kernels 0.18+ refuses to load such a variant
                    raise ResolutionError(
                        f"{spec_key} {name}: metadata.json's digest disagrees with the files at "
                        f"{commit[:12]} ({', '.join(mismatched[:3])}), so kernels would refuse to "
                        "load it; the commit mixes builds",
                        fix=f"pin another revision (`kernlock lock {repo}@<commit>`) or ask "
                        "the publisher to rebuild",
                    )
            variants.append(
                LockedVariant(
                    name=name,
                    targets=tuple(sorted(chosen[name], key=str)),
                    files=files,
                    archs=metadata.archs,
                    kernels_minver=metadata.kernels_minver,
                    python_depends=metadata.python_depends,
                    digest=digest,
                    provenance=metadata.provenance,
                    signed=any(f.path == SIGNATURE_FILE for f in files),
                    signature=signature,
                )
            )
            depends.update(metadata.depends)
        return LockedKernel(
            spec=spec_key,
            repo=repo,
            commit=commit,
            resolution=resolution,
            trust=trust,
            version=pin.version,
            ref=ref,
            depends=tuple(sorted(depends)),
            native=tuple(sorted(native)),
            build_variants=tuple(names),
            variants=tuple(variants),
        )

    def _warn_python_dependent(
        self, spec_key: str, names: list[str], target: Target, variant: str
    ) -> None:
        """A target without a Python part locks this interpreter's build: say so where another
        Python gets another."""
        choices = python_choices(names, target)
        if len(set(choices.values())) > 1:
            python = interpreter(target)[0]
            self.warnings.append(
                f"{spec_key}: on {target} kernels loads a build that depends on the Python "
                f"version; locked {variant} for this interpreter (Python {python}); name the "
                f"Python in the target for the others, e.g. {target}-cp{python.replace('.', '')}"
            )

    def _hash_variant(
        self, repo: str, commit: str, variant: str, files: list[TreeFile]
    ) -> tuple[tuple[LockedFile, ...], bytes | None, bytes | None, dict[str, bytes]]:
        """The variant's locked files, its metadata.json and bundle, and the bytes of its small
        (non-LFS) files by path."""
        prefix = f"build/{variant}/"
        small = [f for f in files if f.lfs_sha256 is None]
        contents = {f.path: self._blobs.read(repo, commit, f) for f in small}
        locked = []
        for entry in files:
            digest = entry.lfs_sha256 or hashlib.sha256(contents[entry.path]).hexdigest()
            locked.append(
                LockedFile(path=entry.path[len(prefix) :], sha256=digest, size=entry.size)
            )
        return (
            tuple(sorted(locked, key=lambda f: f.path)),
            contents.get(prefix + "metadata.json"),
            contents.get(prefix + SIGNATURE_FILE),
            {path[len(prefix) :]: data for path, data in contents.items()},
        )


class SmallFiles:
    """Requests and reads small files through one executor, one request per git blob id."""

    def __init__(self, hub: Hub, pool: Executor) -> None:
        self.hub = hub
        self.pool = pool
        self._blobs: dict[
            str, tuple[tuple[str, str], Future[bytes]]
        ] = {}  # blob id -> (repo, path), its bytes
        self._mutex = threading.Lock()

    def request(self, repo: str, commit: str, entry: TreeFile) -> Future[bytes]:
        """The bytes of `entry`, asked for once per blob id (a later request for the same blob
        shares the first)."""
        with self._mutex:
            known = self._blobs.get(entry.blob_id)
            if known is None:
                future = self.pool.submit(
                    self.hub.fetch, repo, commit, entry.path, entry.blob_id, entry.size
                )
                known = self._blobs[entry.blob_id] = ((repo, entry.path), future)
            return known[1]

    def read(self, repo: str, commit: str, entry: TreeFile) -> bytes:
        """`request`'s bytes; fetched for this very file where the shared fetch, made for another
        file, failed (so an error names this repo and file) or where the listing gives this file
        another size."""
        future = self.request(repo, commit, entry)
        with self._mutex:
            owner = self._blobs[entry.blob_id][0]
        try:
            data = future.result()
        except Exception:
            if owner == (repo, entry.path):
                raise
            return self.hub.fetch(repo, commit, entry.path, entry.blob_id, entry.size)
        if len(data) != entry.size:
            return self.hub.fetch(repo, commit, entry.path, entry.blob_id, entry.size)
        return data


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
