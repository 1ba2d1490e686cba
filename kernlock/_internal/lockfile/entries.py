"""The lock model: frozen dataclasses mirroring `kernels.lock`, each read from and written to a
plain dict.

Shape (see the README for an annotated example)::

    version = "1.1"          # format major.minor ("1.0" without signers): a newer minor is read
                             # (unknown keys ignored, with a warning), a newer major is refused
    targets = [...]          # environments the lock covers
    inputs = [...]           # spec keys the lock was resolved from (freshness)
    [resolved-with]          # versions of the resolving tools, no timestamps
    [exclude-newer]          # the cut-offs Hub commits were skipped after (`exclude_newer`)
    [[kernel]]               # one per spec key, sorted
    [[kernel.variant]]       # one per locked build variant, sorted, with file hashes

In the style of `packaging.pylock` (the shared machinery is `table`):
each class's `from_dict` validates a parsed mapping (TOML keys) and raises
`LockfileError` carrying the key path of the bad value (a parent prefixes its key
to a nested error); `to_dict` is the inverse, shared by every class (a field's key
is its name with dashes; values equal to a field's default are left out). The TOML
text is read and written by `lockfile_toml`; JSON output and the parse cache use
these dicts directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from kernlock._internal.lockfile.exclude_newer import ExcludeNewer
from kernlock._internal.lockfile.format_version import LOCK_VERSION, format_version, read_version
from kernlock._internal.lockfile.mirror import Mirror
from kernlock._internal.lockfile.signing_record import Provenance, Signature
from kernlock._internal.lockfile.table import (
    ALWAYS_WRITTEN,
    Ignored,
    Table,
    ensure,
    get,
    get_object,
    get_objects,
    get_required,
    get_strings,
    get_targets,
    invalid,
    model,
    type_error,
)
from kernlock._internal.settings import UPGRADE_FIX
from kernlock._internal.spec.devices import device_type
from kernlock._internal.spec.ids import (
    DIGEST_ALGORITHMS,
    is_git_sha,
    is_safe_relpath,
    is_sha256,
    is_variant_name,
)
from kernlock._internal.spec.target import Target, parse_target
from kernlock.errors import LockfileError, TargetError, key_text

LOCK_FILENAME = "kernels.lock"
TRUST_KINDS = ("trusted-publisher", "allowlist")
# where an entry came from when no file of the project names it (`kernlock lock --record`)
SOURCES = ("recorded",)
SIGNATURE_FILE = "metadata.json.sigstore"


def format_for(
    kernels: tuple[LockedKernel, ...],
    models: tuple[LockedModel, ...] = (),
    exclude_newer: ExcludeNewer | None = None,
) -> str:
    """The oldest format that holds `kernels`, `models` and a cut-off: "1.5" with `exclude_newer`,
    "1.4" when an entry records a native
    target or its `source`, "1.3" when a variant records its GPU archs, "1.2" with models, "1.1"
    when a variant records its signer, else "1.0".

    A lock without them keeps its bytes (no churn on re-lock), and older kernlocks read it without a
    warning.
    """
    if exclude_newer is not None:
        return "1.5"
    if any(k.native or k.source is not None for k in kernels):
        return "1.4"
    if any(v.archs for k in kernels for v in k.variants):
        return "1.3"
    if models or any(k.devices or k.used_by for k in kernels):
        return "1.2"
    return "1.1" if any(v.signature is not None for k in kernels for v in k.variants) else "1.0"


@model
class LockedFile(Table):
    """One file of a build variant, relative to `build/<variant>/`."""

    path: str
    sha256: str
    size: int

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> LockedFile:
        cls._check_keys(d, ignored)
        path = get_required(d, str, "path")
        ensure(is_safe_relpath(path), "path", f"{path!r} is not a safe relative path")
        sha256 = get_required(d, str, "sha256")
        ensure(is_sha256(sha256), "sha256", "expected 64 lower-case hex characters")
        size = get_required(d, int, "size")
        ensure(size >= 0, "size", "expected a non-negative integer")
        return cls(path=path, sha256=sha256, size=size)


@model
class LockedVariant(Table):
    """A build variant chosen for one or more targets, with its files and build metadata."""

    name: str
    targets: tuple[Target, ...]  # parsed at load; written as their text
    archs: tuple[
        str, ...
    ] = ()  # GPU architectures of a CUDA/ROCm build (`backend.archs`: `9.0a`, `gfx942`; 1.3)
    kernels_minver: str | None = None
    python_depends: tuple[str, ...] = ()
    # algorithm of the metadata digest, checked against `files` when locking
    digest: str | None = None
    # ships kernel-builder's signature bundle (SIGNATURE_FILE, hash-locked like any file)
    signed: bool = False
    signature: Signature | None = None  # who signed it, verified when locking (lock format 1.1)
    provenance: Provenance | None = None
    files: tuple[LockedFile, ...]

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> LockedVariant:
        cls._check_keys(d, ignored)
        name = get_required(d, str, "name")
        ensure(is_variant_name(name), "name", f"{name!r} is not a build variant name")
        files = get_objects(d, LockedFile, "files", ignored)
        paths = [f.path for f in files]
        ensure(len(paths) == len(set(paths)), "files", "duplicate file paths")
        signed = bool(get(d, bool, "signed"))
        ensure(
            signed == (SIGNATURE_FILE in paths),
            "signed",
            f"says {'' if signed else 'not '}signed, but the files "
            f"{'lack' if signed else 'include'} {SIGNATURE_FILE}",
        )
        signature = get_object(d, Signature, "signature", ignored)
        ensure(
            signature is None or signed,
            "signature",
            f"records a signer, but the files lack {SIGNATURE_FILE}",
        )
        digest = get(d, str, "digest")
        ensure(
            digest is None or digest in DIGEST_ALGORITHMS,
            "digest",
            f"unknown digest algorithm {digest!r} (kernlock checks {', '.join(DIGEST_ALGORITHMS)})",
        )
        return cls(
            name=name,
            targets=get_targets(d, "targets"),
            archs=get_strings(d, "archs"),
            kernels_minver=get(d, str, "kernels-minver"),
            python_depends=get_strings(d, "python-depends"),
            digest=digest,
            signed=signed,
            signature=signature,
            provenance=get_object(d, Provenance, "provenance", ignored),
            files=files,
        )


@model
class Override(Table):
    """A per-target pin from `[tool.kernlock.overrides]`: targets matching `when` use `use`."""

    when: str
    use: str
    reason: str

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> Override:
        cls._check_keys(d, ignored)
        return cls(
            when=get_required(d, str, "when"),
            use=get_required(d, str, "use"),
            reason=get_required(d, str, "reason"),
        )


def _native(d: Mapping[str, Any]) -> tuple[str, ...]:
    """An entry's `native` list: `<target>: <reason>` strings, each target a valid one."""
    native = get_strings(d, "native")
    for item in native:
        target, sep, reason = item.partition(": ")
        ensure(sep != "" and reason != "", "native", f"{item!r} is not `<target>: <reason>`")
        try:
            parse_target(target)
        except TargetError:
            raise invalid(f"{target!r} is not a target", "native") from None
    return native


@model
class LockedKernel(Table):
    """A spec resolved to a commit, with the variants locked for each target."""

    spec: str
    repo: str
    aliases: tuple[str, ...] = ()  # other names of the repo (renamed on the Hub)
    override: Override | None = None
    requested: tuple[str, ...] = ()
    version: int | None = None
    ref: str | None = None
    commit: str
    resolution: str
    trust: str
    # "recorded": only `kernlock lock --record` saw it loaded ([tool.kernlock] recorded; 1.4)
    source: str | None = None
    groups: tuple[str, ...] = ()  # the `[tool.kernlock.groups]` it is in; empty: every run (1.7)
    dependency_of: tuple[str, ...] = ()
    depends: tuple[str, ...] = ()
    devices: tuple[
        str, ...
    ] = ()  # device types (`cuda`) the entry is loaded on; empty: every target
    used_by: tuple[
        str, ...
    ] = ()  # the model layers Transformers' kernelize binds it to (`./model: RMSNorm (cuda)`)
    # targets where the layers it serves keep Transformers' own code, and why
    # (`torch2.15-cxx11-cu132-x86_64-linux: no build for this target`; 1.4)
    native: tuple[str, ...] = ()
    build_variants: tuple[str, ...] = field(default=(), metadata=ALWAYS_WRITTEN)
    variants: tuple[LockedVariant, ...] = field(default=(), metadata={"key": "variant"})

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> LockedKernel:
        cls._check_keys(d, ignored)
        spec, repo, aliases = (
            get_required(d, str, "spec"),
            get_required(d, str, "repo"),
            get_strings(d, "aliases"),
        )
        commit = get_required(d, str, "commit")
        ensure(is_git_sha(commit), "commit", f"{commit!r} is not a 40-character hex commit SHA")
        trust = get_required(d, str, "trust")
        ensure(trust in TRUST_KINDS, "trust", f"expected one of {', '.join(TRUST_KINDS)}")
        version = get(d, int, "version")
        ensure(version is None or version >= 0, "version", "expected a non-negative integer")
        source = get(d, str, "source")
        ensure(source is None or source in SOURCES, "source", f"expected {', '.join(SOURCES)}")
        variants = get_objects(d, LockedVariant, "variant", ignored)
        names = [v.name for v in variants]
        ensure(len(names) == len(set(names)), "variant", "duplicate variant names")
        requested_repo = spec.split("@", 1)[0]
        ensure(
            all(alias == requested_repo != repo for alias in aliases),
            "aliases",
            f"{', '.join(aliases)} is not a rename recorded at lock time (only the spec's own "
            f"repo, renamed on the Hub to {repo!r}, can be an alias)",
            fix=f"re-run `kernlock lock -P {repo}`",
        )
        return cls(
            spec=spec,
            repo=repo,
            aliases=aliases,
            override=get_object(d, Override, "override", ignored),
            requested=get_strings(d, "requested"),
            version=version,
            ref=get(d, str, "ref"),
            commit=commit,
            resolution=get_required(d, str, "resolution"),
            trust=trust,
            source=source,
            groups=get_strings(d, "groups"),
            dependency_of=get_strings(d, "dependency-of"),
            depends=get_strings(d, "depends"),
            devices=get_strings(d, "devices"),
            used_by=get_strings(d, "used-by"),
            native=_native(d),
            build_variants=get_strings(d, "build-variants"),
            variants=variants,
        )

    @property
    def identity(self) -> tuple[str, str]:
        """What makes an entry unique: its spec and, for an override, the targets it applies to."""
        return self.spec, self.override.when if self.override else ""

    def names(self) -> tuple[str, ...]:
        """Every repo id that loads this entry: the canonical one and its aliases."""
        return (self.repo, *self.aliases)

    def serves(self, target: Target) -> bool:
        """Whether the entry must cover `target`: every target, or only those of its `devices`, and
        not one where it is recorded native."""
        if self.native_reason(target) is not None:
            return False
        return not self.devices or device_type(target.backend) in self.devices

    def native_reason(self, target: Target | str) -> str | None:
        """Why the layers this entry serves run Transformers' own code on `target`, if they do."""
        prefix = f"{target}: "
        return next((n[len(prefix) :] for n in self.native if n.startswith(prefix)), None)

    def variant_for(self, target: Target | str) -> LockedVariant | None:
        """The variant locked for `target` (a `Target` or its text), if any."""
        if isinstance(target, str):
            target = parse_target(target)
        for variant in self.variants:
            if target in variant.targets:
                return variant
        return None


@model
class LockedModel(Table):
    """A model the project trains (`[tool.kernlock] models`): what Transformers' default kernelize
    binds for it was discovered with this Transformers release and kernelize mapping, and locked as
    the entries it names."""

    name: str  # as declared: a local directory or a Hub model id
    model_class: str
    transformers: str  # the release that discovered its kernels
    kernel_mapping: str  # sha256 of that release's kernelize mapping source
    layers: tuple[
        str, ...
    ] = ()  # `RMSNorm -> org/repo@v4 (cuda: inference, training)`, one per binding

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> LockedModel:
        cls._check_keys(d, ignored)
        digest = get_required(d, str, "kernel-mapping")
        ensure(is_sha256(digest), "kernel-mapping", "expected 64 lower-case hex characters")
        return cls(
            name=get_required(d, str, "name"),
            model_class=get_required(d, str, "model-class"),
            transformers=get_required(d, str, "transformers"),
            kernel_mapping=digest,
            layers=get_strings(d, "layers"),
        )


@model
class Lockfile(Table):
    """A whole `kernels.lock`."""

    version: str = field(default=LOCK_VERSION, metadata=ALWAYS_WRITTEN)
    targets: tuple[Target, ...]  # parsed at load; written as their text
    inputs: tuple[str, ...]
    groups: tuple[str, ...] = ()  # every group declared in [tool.kernlock.groups] (1.7)
    resolved_with: Mapping[str, str] = field(default_factory=dict)
    exclude_newer: ExcludeNewer | None = None  # the cut-offs it was resolved under (1.5)
    models: tuple[LockedModel, ...] = field(default=(), metadata={"key": "model"})
    # where `kernlock vendor --to` pushed the kernels as OCI artifacts (1.6; lockfile.mirror)
    mirrors: tuple[Mirror, ...] = field(default=(), metadata={"key": "mirror"})
    kernels: tuple[LockedKernel, ...] = field(default=(), metadata={"key": "kernel"})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], /, *, source: str | None = None) -> Lockfile:
        """Validate a parsed lock; a newer minor format is read without its unknown keys (logged as
        a warning).

        `LockfileError` carries the key path of the bad value and names `source`;
        a newer major format is `LockfileVersionError`.
        """
        try:
            if not isinstance(d, dict):
                raise type_error(d, dict)
            version = read_version(d.get("version"))
            ignored: Ignored | None = (
                [] if format_version(version) > format_version(LOCK_VERSION) else None
            )
            lock = cls._from_dict(d, ignored)
        except LockfileError as error:
            raise (error.in_file(source) if source else error) from None
        if ignored:
            import logging

            keys = ", ".join(map(key_text, ignored))
            logging.getLogger("kernlock").warning(
                "%s: written by a newer kernlock (lock format %s; this one reads %s); ignoring %s; "
                "use them: " + UPGRADE_FIX,
                source or LOCK_FILENAME,
                version,
                LOCK_VERSION,
                keys,
            )
        return lock

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> Lockfile:
        cls._check_keys(d, ignored)
        resolved_with = get(d, dict, "resolved-with") or {}
        for key, value in resolved_with.items():
            if not isinstance(value, str):
                raise type_error(value, str, "resolved-with", key)
        kernels = get_objects(d, LockedKernel, "kernel", ignored)
        models = get_objects(d, LockedModel, "model", ignored)
        names = [m.name for m in models]
        ensure(len(names) == len(set(names)), "model", "duplicate model names")
        seen: set[tuple[str, str]] = set()
        for index, kernel in enumerate(kernels):
            if kernel.identity in seen:
                raise invalid(f"duplicate entry for {kernel.spec!r}", "kernel", index, "spec")
            seen.add(kernel.identity)
        return cls(
            version=read_version(d.get("version")),
            targets=get_targets(d, "targets"),
            inputs=get_strings(d, "inputs"),
            groups=get_strings(d, "groups"),
            resolved_with=dict(resolved_with),
            exclude_newer=get_object(d, ExcludeNewer, "exclude-newer", ignored),
            models=models,
            mirrors=get_objects(d, Mirror, "mirror", ignored),
            kernels=kernels,
        )

    @property
    def newer_format(self) -> bool:
        """Whether a newer kernlock wrote this lock (a newer minor: readable, but not to be
        overwritten)."""
        return format_version(self.version) > format_version(LOCK_VERSION)

    def kernel(self, spec: str, target: Target | str | None = None) -> LockedKernel | None:
        """The entry for a spec key: the one covering `target`, else the one without an override."""
        entries = self.entries(spec)
        if target is not None:
            return next((k for k in entries if k.variant_for(target) is not None), None)
        return next((k for k in entries if k.override is None), entries[0] if entries else None)

    def entries(self, spec: str) -> list[LockedKernel]:
        """Every entry of a spec key (more than one when overrides send targets elsewhere)."""
        return [kernel for kernel in self.kernels if kernel.spec == spec]

    def for_repo(self, repo: str) -> list[LockedKernel]:
        """All entries that load `repo`, under its canonical name or an alias."""
        return [kernel for kernel in self.kernels if repo in kernel.names()]

    def uncovered(self, target: Target | str) -> list[str]:
        """Spec keys with no entry covering `target`."""
        if isinstance(target, str):
            target = parse_target(target)
        covered = {k.spec for k in self.kernels if k.variant_for(target) is not None}
        needed = {k.spec for k in self.kernels if k.serves(target)}
        return [
            spec
            for spec in dict.fromkeys(k.spec for k in self.kernels)
            if spec in needed and spec not in covered
        ]
