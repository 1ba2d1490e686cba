"""kernels' own JSON `kernels.lock`: recognised, migrated into kernlock's lock, exported for
kernels.

`kernels lock` writes JSON to the same file name kernlock uses. `kernlock lock`
never replaces it silently: without `--migrate` it stops and says how to
convert; with it, every commit of the JSON lock becomes a kept pin (nothing is
re-resolved), the JSON is preserved beside it as `kernels.lock.json`, and one
line says what was converted. `kernlock export --format kernels` writes the
JSON kernels reads, never over kernlock's lock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kernlock._internal.compat.kernels_json_lock import (
    KernelsPin,
    kernels_lock_json,
    parse_kernels_lock,
    unsupported_line,
)
from kernlock._internal.fs.atomic import atomic_write
from kernlock._internal.lockfile.entries import LockedKernel, Lockfile
from kernlock._internal.lockfile.export_output import write_export
from kernlock._internal.spec.kernel_spec import parse_spec, version_of_branch
from kernlock.errors import KernlockError, UsageError

JSON_SUFFIX = ".json"  # kernels.lock -> kernels.lock.json
MIGRATED = "kept from kernels' JSON lock"


def looks_like_kernels_lock(data: bytes) -> bool:
    """Whether `data` is kernels' JSON lock (a list of dependency/lock pairs); cheap, imports
    nothing."""
    if not data.lstrip().startswith(b"["):
        return False
    try:
        entries = json.loads(data)
    # `[` × 200 000: nested past the decoder's depth, so no kernels lock
    except (
        ValueError,
        RecursionError,
    ):
        return False
    return isinstance(entries, list) and all(
        isinstance(e, dict) and ({"dependency", "lock"} <= set(e) or {"repo_id", "sha"} <= set(e))
        for e in entries
    )


def migrate_hint(path: Path) -> tuple[str, str]:
    """The problem of a kernels JSON lock where kernlock's lock is expected, and its fix."""
    return (
        f"{path} holds kernels' own JSON lock, not kernlock's",
        "convert it with `kernlock lock --migrate` (its commits are kept as pins and the JSON is "
        f"kept as {path.name}{JSON_SUFFIX})",
    )


@dataclass(frozen=True)
class Migration:
    """A kernels JSON lock being converted: its pins, and where the original is kept."""

    source: Path
    original: bytes
    pins: tuple[KernelsPin, ...]

    @property
    def kept_as(self) -> Path:
        return self.source.with_name(self.source.name + JSON_SUFFIX)

    def as_previous_lock(self) -> Lockfile:
        """The pins as a previous kernlock lock, so the resolver keeps each commit (entries without
        variants)."""
        kernels = tuple(
            LockedKernel(
                spec=_spec_key(pin),
                repo=pin.repo,
                commit=pin.commit,
                trust="",
                resolution=f"{MIGRATED} ({_pin_text(pin)})",
                version=pin.version,
                ref=f"v{pin.version}" if pin.version is not None else pin.revision,
            )
            for pin in self.pins
        )
        return Lockfile(targets=(), inputs=(), kernels=kernels)

    def preserve(self) -> None:
        """Keep the original JSON beside the lock; refuse to overwrite a different file there."""
        if self.kept_as.exists():
            if self.kept_as.read_bytes() == self.original:
                return
            raise KernlockError(
                f"cannot keep {self.source}'s kernels JSON lock as {self.kept_as}: that file "
                "exists and differs",
                fix="move it away and run `kernlock lock --migrate` again",
            )
        atomic_write(self.kept_as, self.original)

    def summary(self, lock: Lockfile) -> str:
        """One line: what was converted, which pins were kept, where the original went."""
        kept = {(k.repo, k.commit) for k in lock.kernels}
        unused = [f"{_pin_text(p)}" for p in self.pins if (p.repo, p.commit) not in kept]
        line = (
            f"migrated kernels' JSON lock {self.source} ({len(self.pins)} pins, "
            f"{len(self.pins) - len(unused)} kept as locked commits) to kernlock's format; the "
            f"original is kept as {self.kept_as}"
        )
        if unused:
            line += f"; not requested by any source, so dropped: {', '.join(unused)}"
        return line


def _spec_key(pin: KernelsPin) -> str:
    return f"{pin.repo}@v{pin.version}" if pin.version is not None else f"{pin.repo}@{pin.revision}"


def _pin_text(pin: KernelsPin) -> str:
    return f"{_spec_key(pin)} {pin.commit[:12]}"


def migration_for(path: Path, migrate: bool) -> Migration | None:
    """The migration of `path` if it holds kernels' JSON lock; without `migrate`, refuse with the
    fix."""
    from kernlock._internal.lockfile.read_bytes import read_lock_bytes
    from kernlock.errors import LockfileError

    try:
        data = read_lock_bytes(path)  # a device or a huge file is not read whole here either
    except LockfileError:
        return None
    if not looks_like_kernels_lock(data):
        return None
    if (older := unsupported_line()) is not None:
        raise UsageError(
            f"{path} holds kernels' own JSON lock; {older}; nothing was changed",
            fix=f"mv {path.name} {path.name}{JSON_SUFFIX} && kernlock lock",
        )
    if not migrate:
        problem, fix = migrate_hint(path)
        raise UsageError(f"{problem}; nothing was changed", fix=fix)
    try:
        pins = tuple(parse_kernels_lock(data.decode("utf-8")))
    except (ValueError, UnicodeDecodeError) as error:
        raise UsageError(
            f"{path}: kernels' JSON lock cannot be read ({error})",
            fix="correct or remove it, then run `kernlock lock`",
        ) from None
    return Migration(source=path, original=data, pins=pins)


# ---------------------------------------------------------------- export


def kernels_pin(kernel: LockedKernel) -> KernelsPin:
    """The kernels dependency (repo, version or revision) under which kernels looks a locked entry
    up."""
    spec = parse_spec(kernel.spec)
    if spec.revision is not None:
        number = version_of_branch(spec.revision)
        if number is not None:
            return KernelsPin(kernel.repo, number, None, kernel.commit)
        return KernelsPin(kernel.repo, None, spec.revision, kernel.commit)
    if kernel.version is not None:
        return KernelsPin(kernel.repo, kernel.version, None, kernel.commit)
    return KernelsPin(kernel.repo, None, kernel.commit, kernel.commit)


def exported_entries(lock: Lockfile) -> tuple[list[LockedKernel], list[str]]:
    """The entries kernels' JSON lock holds, and a warning for each per-target override it cannot.

    kernels' lock has one pin per kernel and no targets: an override's entry written beside the
    spec's own would make plain kernels load the override's commit everywhere (or the spec's on
    the override's targets), so only each spec's own pin is written. A spec with no entry of its
    own is written when one override covers all of it, and refused when several do.
    """
    entries, warnings = [], []
    for kernel in lock.kernels:
        own = [k for k in lock.entries(kernel.spec) if k.override is None]
        if kernel.override is None or (not own and len(lock.entries(kernel.spec)) == 1):
            entries.append(kernel)
            continue
        if not own:
            whens = ", ".join(k.override.when for k in lock.entries(kernel.spec) if k.override)
            raise UsageError(
                f"{kernel.spec}: every locked target has an override ({whens}), each its own "
                "commit, and kernels' JSON lock holds one pin per kernel; nothing was written",
                fix="lock a target no override matches (`kernlock lock --target T`), or load "
                "through kernlock (`kernlock run`, `kernlock.apply()`), which applies the "
                "overrides",
            )
        targets = ", ".join(sorted({str(t) for v in kernel.variants for t in v.targets}))
        warnings.append(
            f"{kernel.spec}: the override for {kernel.override.when} ({kernel.override.use}, "
            f"{kernel.commit[:12]}; {targets}) is not written: kernels' JSON lock holds one pin "
            f"per kernel, so plain kernels loads the spec's own {own[0].commit[:12]} there too; "
            "load through kernlock (`kernlock run`, `kernlock.apply()`) for the override"
        )
    return entries, warnings


def kernels_json(lock: Lockfile) -> str:
    """kernels' `KernelLocks` JSON: one entry per dependency, requested kernels before dependencies.

    kernels looks a top-level kernel up by the first entry with its repo id, and a
    kernel's dependencies by (repo, version); two lock entries that map to the same
    kernels dependency keep the first. Per-target overrides are left out (`exported_entries`).
    """
    if (older := unsupported_line()) is not None:
        raise UsageError(
            f"cannot export for kernels: {older}",
            fix="load through kernlock (`kernlock run`, `kernlock.apply()`), which needs no "
            "kernels lock",
        )
    entries, _ = exported_entries(lock)
    ordered = sorted(entries, key=lambda k: (bool(k.dependency_of) and not k.requested, k.spec))
    return kernels_lock_json(kernels_pin(kernel) for kernel in ordered)


def export_kernels_json(lock: Lockfile, lockfile: Path, output: Path) -> None:
    """Write kernels' JSON for `lock` to `output`, never over kernlock's own lock or a file that is
    not a kernels JSON lock (`kernlock._internal.lockfile.export_output`)."""
    write_export(
        (kernels_json(lock) + "\n").encode("utf-8"),
        lockfile,
        output,
        kind="a kernels JSON lock",
        is_kind=looks_like_kernels_lock,
        example=f"{lockfile.name}{JSON_SUFFIX}",
    )
