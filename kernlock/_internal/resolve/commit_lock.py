"""Locking one commit of a kernel: its trust, the variant chosen per target, the hash of every file.

`CommitLocker`, a part the resolver (`kernlock._internal.resolve.resolver.Resolver`) is given, turns
a commit into a `LockedKernel`, refusing a missing commit, a target without a variant, or mixed
digests; it keeps a previous entry where it is still complete.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
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
)
from kernlock._internal.lockfile.kernels_json import MIGRATED
from kernlock._internal.resolve.jobs import Job
from kernlock._internal.resolve.no_variant import (
    MissingBuild,
    missing_builds_error,
    no_variant_problem,
)
from kernlock._internal.resolve.options import ResolveOptions
from kernlock._internal.resolve.signing import (
    check_signed_digest,
    signature_expected,
    variant_signature,
)
from kernlock._internal.resolve.small_files import SmallFiles
from kernlock._internal.spec.target import Target
from kernlock._internal.store.metadata import digest_mismatches, read_variant_metadata
from kernlock.errors import ResolutionError, TrustError


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
