"""The download engine: locked files fetched into the Hub cache as `hf_hub_download` would, each
verified against the lock before it is linked, resumed where a partial was left, under
huggingface_hub's per-file lock; and `ensure_variant`, the verified directory of a locked variant
(from the vendor directory, the cache, or the Hub).

Where the files live and whether they are intact is `kernlock._internal.store.hub_cache` (below
`check`, which reads it).
"""

from __future__ import annotations

import errno
import os
import stat
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

from kernlock._internal import settings
from kernlock._internal.fetch.download_lock import download_lock, file_lock_name
from kernlock._internal.fetch.partial import (
    VALIDATOR_SUFFIX,
    Partial,
    create_private,
    drop,
    open_below,
    open_partial,
    opened_below,
    read_validator,
    remove_mine,
    validator_name,
)
from kernlock._internal.fs.atomic import current_umask
from kernlock._internal.lockfile.entries import LockedFile, LockedKernel, LockedVariant, Lockfile
from kernlock._internal.settings import VENDOR_ENV
from kernlock._internal.store.cache_gc import keep
from kernlock._internal.store.hub_cache import (
    _CHUNK,
    FileKey,
    check_variant,
    file_key,
    hub_cache_dir,
    missing_files,
    repair_vendor_command,
    repo_folder,
    variant_dir,
    vendored_variant_dir,
)
from kernlock._internal.store.registry import register
from kernlock.errors import (
    HubError,
    IntegrityError,
    KernlockError,
    MissingFilesError,
    WriteError,
    local_write_problem,
)

if TYPE_CHECKING:
    from kernlock._internal.hub.client import Hub


def _install_file(
    hub: Hub,
    kernel: LockedKernel,
    variant: str,
    locked: LockedFile,
    cache: Path,
    force: bool,
    fetched: list[int] | None = None,
) -> FileKey | None:
    """Download one locked file into the Hub cache as `hf_hub_download` would, verified before it is
    linked.

    Same blob name (the ETag: sha256 for LFS files, else the git blob id), same lock file
    (`.locks/<repo folder>/<etag>.lock`), blob mode from the umask, a relative snapshot
    symlink: kernlock, kernels and `hf_hub_download` share one cache in both directions.
    The bytes go to `<etag>.<random>.incomplete`, capped at the locked size, and become the
    blob only when size and sha256 match the lock. A partial a killed run or a dropped
    connection left behind is continued with a `Range` request while the server's validator
    is unchanged (`Hub.download_to`); a resumed file that does not match is dropped and
    downloaded again from byte 0, once. Other `.incomplete` files are removed under the lock.
    Returns the file's key when this call downloaded and verified it, else None.
    """
    storage = cache / repo_folder(kernel.repo)
    link = storage / "snapshots" / kernel.commit / "build" / variant / locked.path
    locks = cache / ".locks" / repo_folder(kernel.repo)
    # created here, and never a link
    os.close(open_below(cache, ".locks", repo_folder(kernel.repo)))
    # One process per file asks the Hub; the others wait here (bounded) and find it in place.
    with download_lock(locks / file_lock_name(kernel.commit, variant, locked.path)):
        if link.is_file() and not force:
            return None
        return _fetch_blob_and_link(
            hub, kernel, variant, locked, storage, link, locks, force, fetched
        )


def _fetch_blob_and_link(
    hub: Hub,
    kernel: LockedKernel,
    variant: str,
    locked: LockedFile,
    storage: Path,
    link: Path,
    locks: Path,
    force: bool,
    fetched: list[int] | None = None,
) -> FileKey | None:
    from huggingface_hub.errors import RevisionNotFoundError

    from kernlock._internal.hub.transport import hub_deadline

    deadline = time.monotonic() + hub_deadline()
    try:
        remote = hub.file_metadata(
            kernel.repo, kernel.commit, f"build/{variant}/{locked.path}", deadline
        )
    except HubError as error:
        if isinstance(error.__cause__, RevisionNotFoundError):
            problem, fix = commit_gone(kernel)
            raise MissingFilesError(problem, fix=fix) from None
        raise
    mismatch = (len(remote.etag) == 64 and remote.etag != locked.sha256) or remote.size not in (
        None,
        locked.size,
    )
    if mismatch:
        raise IntegrityError(
            f"{kernel.spec}: the Hub lists {variant}/{locked.path} with sha256 "
            f"{remote.etag if len(remote.etag) == 64 else '?'} and size {remote.size}, but "
            f"kernels.lock expects {locked.sha256} and {locked.size}; nothing was downloaded",
            fix=f"re-lock with `kernlock lock -P {kernel.repo}` if the repository was rewritten",
        )
    blob = storage / "blobs" / remote.etag
    key: FileKey | None = None
    with (
        opened_below(storage.parent, storage.name, "blobs") as blobs_fd,
        download_lock(locks / f"{remote.etag}.lock"),
    ):
        partial = _resumable_partial(blobs_fd, blob.parent, remote.etag)
        downloaded = force or not blob.is_file()
        if downloaded:
            temp = partial or _new_partial(blobs_fd, blob.parent, remote.etag)
            kept = False
            try:
                for attempt in (1, 2):
                    resumed, actual = hub.download_to(
                        kernel.repo, remote, locked.size, temp, deadline
                    )
                    if actual == locked.sha256 and os.fstat(temp.fd).st_size == locked.size:
                        break
                    # a kept partial went bad: drop its bytes and start over once
                    if attempt == 1 and resumed:
                        temp.restart()
                        continue
                    raise IntegrityError(
                        f"{kernel.spec}: the Hub sent {variant}/{locked.path} with sha256 "
                        f"{actual}, but kernels.lock expects {locked.sha256}; nothing was kept",
                        fix=f"re-run, or re-lock with `kernlock lock -P {kernel.repo}` if "
                        "the repository was rewritten",
                    )
                key = _publish(temp, blob, locked.sha256)
                if fetched is not None:
                    # list.append: safe from the pool's threads
                    fetched.append(locked.size - resumed)
            except KeyboardInterrupt:
                kept = temp.resumable()
                raise
            # the Hub failed (not a stop: a cut-off or over-long body is never kept)
            except HubError as error:
                kept = error.__cause__ is not None and temp.resumable()
                raise
            finally:
                os.close(temp.fd)
                if not kept:
                    drop(blobs_fd, temp.name)
        elif partial is not None:
            os.close(partial.fd)
            drop(blobs_fd, partial.name)
        _link(storage, link, blobs_fd, blob)
    return key


def _new_partial(blobs_fd: int, blobs: Path, etag: str) -> Partial:
    """A fresh private file (0600, created, never followed) for a download of `etag`."""
    name = f"{etag}.{uuid.uuid4().hex[:8]}.incomplete"
    return Partial(blobs_fd, name, create_private(blobs_fd, name), blobs / name)


def _publish(temp: Partial, blob: Path, sha256: str) -> FileKey | None:
    """Move a verified download into place as `blob`, with huggingface_hub's blob mode (from the
    umask).

    Returns the key of the very file that was written and hashed, or None when the umask lets others
    write the blob (a group-shared cache): then the check that follows hashes it again before
    anything trusts it.
    """
    mode = 0o666 & ~current_umask()
    os.fchmod(temp.fd, mode)
    os.replace(temp.name, blob.name, src_dir_fd=temp.dir_fd, dst_dir_fd=temp.dir_fd)
    written = os.fstat(temp.fd)
    placed = os.stat(blob.name, dir_fd=temp.dir_fd, follow_symlinks=False)
    if (placed.st_dev, placed.st_ino) != (written.st_dev, written.st_ino):
        raise IntegrityError(
            f"{blob} is not the file kernlock downloaded and verified: another user of the shared "
            "cache put another file in its place while it was moved there",
            fix=f"remove it (`rm -- {blob}`) and run the command again",
        )
    return None if mode & (stat.S_IWGRP | stat.S_IWOTH) else file_key(written, sha256)


def _link(storage: Path, link: Path, blobs_fd: int, blob: Path) -> None:
    """Point the snapshot entry `link` at `blob` (relative, as huggingface_hub does), never through
    a link."""
    parts = link.parent.relative_to(storage).parts
    with opened_below(storage.parent, storage.name, *parts) as link_fd:
        with suppress(FileNotFoundError):
            os.unlink(link.name, dir_fd=link_fd)
        try:
            os.symlink(os.path.relpath(blob, link.parent), link.name, dir_fd=link_fd)
        except OSError as error:
            if error.errno == errno.EEXIST:
                raise
            # no symlinks here: a plain copy, as huggingface_hub
            _copy_blob(blobs_fd, blob.name, link_fd, link.name)


def _copy_blob(blobs_fd: int, blob: str, link_fd: int, name: str) -> None:
    source = os.open(blob, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=blobs_fd)
    try:
        target = create_private(link_fd, name)
        try:
            while chunk := os.read(source, _CHUNK):
                os.write(target, chunk)
            os.fchmod(target, 0o666 & ~current_umask())
        finally:
            os.close(target)
    finally:
        os.close(source)


def _resumable_partial(blobs_fd: int, blobs: Path, etag: str) -> Partial | None:
    """The largest partial download of `etag` a killed or failed run of this user left (with its
    validator), open; this user's others are removed. Another user's, or one others can write, is
    never resumed (`open_partial`).

    Called under the blob's lock: no other process writes these now.
    """
    names = [n for n in os.listdir(blobs_fd) if n.startswith(etag + ".")]
    found: list[tuple[int, str, int]] = []
    for name in names:
        if name.endswith("incomplete"):
            fd = open_partial(blobs_fd, name)
            if fd is None:
                # only this user's files go; another user's stay and are never resumed
                drop(blobs_fd, name)
            else:
                found.append((os.fstat(fd).st_size, name, fd))
    found.sort()
    keep = found.pop() if found and read_validator(blobs_fd, found[-1][1]) is not None else None
    for _, name, fd in found:
        os.close(fd)
        drop(blobs_fd, name)
    for name in names:
        if name.endswith(VALIDATOR_SUFFIX) and (keep is None or name != validator_name(keep[1])):
            remove_mine(blobs_fd, name)
    return Partial(blobs_fd, keep[1], keep[2], blobs / keep[1]) if keep else None


def commit_gone(kernel: LockedKernel) -> tuple[str, str]:
    """Why a locked commit the Hub answers 404 for cannot be fetched, and the fix that works."""
    if kernel.ref is not None:
        fix = f"re-lock it to what {kernel.ref} holds now: `kernlock lock -P {kernel.repo}`"
    else:
        fix = (
            "its spec pins that commit: name a revision the Hub has in the spec, then run "
            "`kernlock lock`"
        )
    return (
        f"{kernel.spec}: the locked commit {kernel.commit[:12]} is gone from the Hub (it answers "
        "404 for it: the repo's history was rewritten)",
        fix,
    )


# What fetches locked files into the cache, checked as they arrive, called as `download_variant`
# is: that (the Hub), or an OCI mirror's (`kernlock._internal.fetch.oci_pull.MirrorFetch`).
Fetch = Callable[..., dict[str, FileKey]]


def download_variant(
    kernel: LockedKernel,
    variant: LockedVariant,
    cache: Path,
    files: list[LockedFile] | None = None,
    force: bool = False,
    fetched: list[int] | None = None,
) -> dict[str, FileKey]:
    """Fetch locked files of one variant into the Hub cache (only those files, at the locked
    commit); the keys of those this call downloaded, each verified against the lock as its bytes
    arrived (for `check_variant`). `fetched` gets the bytes each download really transferred (a
    resumed one: only what it added)."""
    from kernlock._internal.hub.client import Hub

    wanted = list(variant.files if files is None else files)
    if not wanted:
        return {}
    hub = Hub()
    with ThreadPoolExecutor(max_workers=min(8, len(wanted))) as pool:
        keys = list(
            pool.map(
                lambda locked: _install_file(
                    hub, kernel, variant.name, locked, cache, force, fetched
                ),
                wanted,
            )
        )
    return {locked.path: key for locked, key in zip(wanted, keys, strict=False) if key is not None}


def _describe_files(files: list[LockedFile]) -> str:
    names = ", ".join(f.path for f in files[:3])
    return names + ("…" if len(files) > 3 else "")


def discard(kernel: LockedKernel, variant: str, files: list[LockedFile], cache: Path) -> None:
    """Remove cached files so they are fetched again: the snapshot link, and its blob when no
    other snapshot of the repo points to it. Only one link is followed: a blob that is itself a
    link (huggingface_hub's shared blob store) loses the link, never the shared file."""
    storage = cache / repo_folder(kernel.repo)
    root = variant_dir(kernel, variant, cache)
    for locked in files:
        link = root / locked.path
        blob = (
            Path(os.path.normpath(link.parent / os.readlink(link))) if link.is_symlink() else None
        )
        link.unlink(missing_ok=True)
        if blob is None or blob.parent != Path(os.path.normpath(storage / "blobs")):
            continue
        if not any(_points_to(other, blob) for other in (storage / "snapshots").rglob("*")):
            blob.unlink(missing_ok=True)


def _points_to(link: Path, blob: Path) -> bool:
    try:
        return link.is_symlink() and os.path.normpath(
            link.parent / os.readlink(link)
        ) == os.path.normpath(blob)
    except OSError:
        return False


def ensure_variant(
    kernel: LockedKernel,
    variant: LockedVariant,
    *,
    offline: bool = False,
    lock: tuple[Path, Lockfile] | None = None,
    fetch: Fetch | None = None,
) -> Path:
    """The verified directory of a locked variant.

    From `$KERNLOCK_VENDOR_DIR` when set (never the Hub); else from the Hub
    cache, downloading only the variant's missing files (not when `offline`),
    through `fetch` when given (an OCI mirror, offline or not), else from the Hub.
    A downloaded file that does not match the lock is removed again. A download for `lock` (its
    path and contents) registers it and roots the commit (`kernlock._internal.store.cache_gc`).
    """
    vendor = settings.path(VENDOR_ENV)
    if vendor is not None:
        root = vendored_variant_dir(kernel, variant.name, vendor)
        missing = missing_files(kernel, variant, root)
        if missing:
            raise MissingFilesError(
                f"{kernel.spec}: {variant.name} is not complete in the vendor directory {vendor} "
                f"(missing {_describe_files(missing)})",
                fix=f"run `{repair_vendor_command(vendor)}` with this lock",
            )
        check_variant(kernel, variant, root, stamped=True, repair=repair_vendor_command(vendor))
        return root
    cache = hub_cache_dir()
    root = variant_dir(kernel, variant.name, cache)
    missing = missing_files(kernel, variant, root)
    just_verified: dict[str, FileKey] = {}
    if missing:
        if offline and fetch is None:
            raise MissingFilesError(
                f"{kernel.spec}: {len(missing)} locked file(s) of {variant.name} are not in the "
                f"cache ({_describe_files(missing)}) and the Hub is offline",
                fix="run `kernlock sync` where the Hub is reachable",
            )
        try:
            if lock is not None:  # first: a `kernlock cache prune` meanwhile keeps the commit
                register(*lock)
            just_verified = (fetch or download_variant)(kernel, variant, cache, missing)
        except (IntegrityError, MissingFilesError, WriteError):
            raise
        except Exception as error:
            local = local_write_problem(error, cache)
            if local is not None:
                raise MissingFilesError(
                    f"{kernel.spec}: cannot store {variant.name} in the cache: {local[0]}",
                    fix=local[1],
                ) from None
            reason = error.message if isinstance(error, KernlockError) else type(error).__name__
            raise MissingFilesError(
                f"{kernel.spec}: {len(missing)} locked file(s) of {variant.name} are not in the "
                f"cache ({_describe_files(missing)}) and cannot be downloaded ({reason})",
                fix="run `kernlock sync` where the Hub is reachable",
            ) from None
    check_variant(kernel, variant, root, stamped=True, just_verified=just_verified)
    if missing and lock is not None:
        keep(*lock, cache, [(kernel.repo, kernel.commit)])  # a root left unwritten costs only GC
    return root
