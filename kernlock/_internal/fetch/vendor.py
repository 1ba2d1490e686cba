"""`kernlock vendor DIR`: a self-contained copy of the locked variants, for air-gapped clusters.

Layout::

    DIR/kernels.lock                                  the lock, copied
    DIR/.kernlock-vendor                              marker
    DIR/kernels--org--repo/<commit>/<variant>/...     the locked files (plain copies)

Point a run at it with `KERNLOCK_VENDOR_DIR=DIR` (or `kernlock run --vendor
DIR`): `kernlock.apply()` then reads the lock and every kernel from DIR, with
no Hub and no Hub cache.

Two `kernlock vendor` runs into one directory wait for each other: the copy and
check of the variants and the write of the lock happen under a mutex file in DIR
(`.kernlock-vendor.mutex`, removed on release; `$KERNLOCK_MUTEX_TIMEOUT`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kernlock._internal import settings
from kernlock._internal.fetch.sync import selected_variants, sync_variants
from kernlock._internal.fs.atomic import current_umask
from kernlock._internal.fs.inside import directory, refuse_link, write_inside
from kernlock._internal.fs.mutex import DEFAULT_TIMEOUT, DirectoryMutex
from kernlock._internal.lockfile.entries import LOCK_FILENAME, LockedKernel, LockedVariant
from kernlock._internal.project.groups import select_groups
from kernlock._internal.project.workspace import open_workspace
from kernlock._internal.store.hub_cache import (
    VENDOR_MARKER,
    check_variant,
    repair_vendor_command,
    variant_dir,
    vendored_variant_dir,
)
from kernlock.errors import IntegrityError, MissingFilesError, UsageError, WriteError


@dataclass(frozen=True)
class VendorReport:
    """What `vendor()` wrote."""

    directory: Path
    variants: int
    files: int
    bytes: int
    repaired: int = 0  # variants copied again because they did not match the lock

    def to_dict(self) -> dict[str, object]:
        """The report as JSON (`kernlock vendor --json`)."""
        return {
            "directory": str(self.directory),
            "variants": self.variants,
            "files": self.files,
            "bytes": self.bytes,
            "repaired": self.repaired,
        }


def vendor(
    directory: str | os.PathLike[str],
    project_dir: str | os.PathLike[str] = ".",
    *,
    targets: Iterable[str] = (),
    all_targets: bool = True,
    lockfile: str | os.PathLike[str] | None = None,
    repair: bool = False,
    groups: Iterable[str] = (),
) -> VendorReport:
    """Export the locked variants for `targets` (default: every locked target) into `directory`.

    A variant already there must match the lock; with `repair`, one that does not is copied again.
    `groups` exports only the ungrouped entries' variants and those of these groups (the lock is
    copied whole: a run from `directory` chooses the same groups).
    """
    # the project's lock, not $KERNLOCK_VENDOR_DIR's
    workspace = open_workspace(project_dir, lockfile, readers=False)
    path, lock = workspace.lock_path, workspace.read_lock()
    targets = tuple(targets)
    use_all = all_targets and not targets
    out = Path(directory)
    try:  # before anything is downloaded for it
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # an unwritable parent, a file in the way, a read-only disk
        where = f": {error.filename}" if error.filename and str(error.filename) != str(out) else ""
        raise UsageError(
            f"cannot create the vendor directory {out} ({error.strerror}{where}); nothing was "
            "written",
            fix="vendor into a directory you can write (`kernlock vendor DIR`), or have its owner "
            f"create it for you (`mkdir -p {shlex.quote(str(out))}`)",
        ) from None
    chosen = select_groups(lock, groups, f"vendor {shlex.quote(str(directory))}")
    pairs = selected_variants(chosen, workspace.chosen_targets(chosen, targets, use_all))
    sync_variants(path, pairs)  # into the Hub cache, verified: the copies below come from there
    from kernlock._internal.store.hub_cache import hub_cache_dir

    cache = hub_cache_dir()
    timeout = settings.seconds(settings.MUTEX_TIMEOUT_ENV, DEFAULT_TIMEOUT, zero=True)
    mutex = DirectoryMutex(
        out,
        timeout,
        name=VENDOR_MUTEX_NAME,
        what=f"writing the vendor directory {out}",
        optional=False,
    )
    mutex.acquire(time.monotonic() + timeout)
    try:
        return _vendor_into(out, path, pairs, cache, repair)
    except OSError as error:  # a variant directory inside that is not writable, a full disk
        from kernlock.errors import local_write_problem

        local = local_write_problem(error, out)
        problem = (
            local[0] if local else f"cannot write into {out} ({error.strerror}: {error.filename})"
        )
        raise WriteError(
            f"vendor: {problem}; the variants already there are unchanged",
            fix=f"make {out} writable, or vendor into another directory",
        ) from None
    finally:
        mutex.release()


VENDOR_MUTEX_NAME = ".kernlock-vendor.mutex"  # held while a vendor run writes the directory


def _vendor_into(
    out: Path,
    path: Path,
    pairs: list[tuple[LockedKernel, LockedVariant]],
    cache: Path,
    repair: bool,
) -> VendorReport:
    files = size = repaired = 0
    for kernel, variant in pairs:
        final = vendored_variant_dir(kernel, variant.name, out)
        if final.exists():
            try:
                check_variant(kernel, variant, final, repair=repair_vendor_command(out))
            except (IntegrityError, MissingFilesError):
                if not repair:
                    raise
                _copy_variant(kernel, variant, variant_dir(kernel, variant.name, cache), final)
                repaired += 1
        else:
            _copy_variant(kernel, variant, variant_dir(kernel, variant.name, cache), final)
        files += len(variant.files)
        size += sum(f.size for f in variant.files)
    # a run reading the vendor dir sees the old lock or the new one
    write_inside(out, LOCK_FILENAME, path.read_bytes())
    write_inside(
        out, VENDOR_MARKER, "kernlock vendor directory: set KERNLOCK_VENDOR_DIR to this directory\n"
    )
    return VendorReport(
        directory=out, variants=len(pairs), files=files, bytes=size, repaired=repaired
    )


def _copy_variant(kernel: LockedKernel, variant: LockedVariant, source: Path, final: Path) -> None:
    """Copy the locked files of a verified variant from `source` to `final` (replacing it), checked
    before it lands."""
    out = final.parents[2]
    # mkdtemp's 0700 keeps other users out (no link planted inside) until the copy is checked
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=out))
    try:
        for locked in variant.files:
            destination = staging / locked.path
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / locked.path, destination)
        check_variant(kernel, variant, staging)
        staging.chmod(0o777 & ~current_umask())  # then readable by the cluster's other users
        # `kernels--org--repo/<commit>` made or opened without following a link planted there
        with directory(out, final.parent.relative_to(out), create=True) as parent:
            refuse_link(parent, final.parent, final.name)
            if os.path.lexists(final):
                damaged = Path(tempfile.mkdtemp(prefix=".damaged-", dir=out))
                os.replace(final.name, damaged / final.name, src_dir_fd=parent)
                os.replace(staging, final.name, dst_dir_fd=parent)
                shutil.rmtree(damaged)
            else:
                os.replace(staging, final.name, dst_dir_fd=parent)
    except BaseException:
        # a failed copy leaves nothing half-written behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
