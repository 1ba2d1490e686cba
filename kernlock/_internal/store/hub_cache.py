"""Locked variants on disk: where they live and whether they are intact (fetching the missing ones
is `kernlock._internal.fetch.download`).

Files live where kernels reads them: the Hugging Face Hub cache
(`KERNELS_CACHE`, else `HF_HUB_CACHE`, else `HF_HOME/hub`), under
`kernels--org--repo/snapshots/<commit>/build/<variant>/`. A verified-file stamp
(device, inode, size, mtime, ctime → sha256), kept in kernlock's private per-user
directory (`kernlock._internal.fs.private`) and signed there, lets warm starts skip re-hashing;
any change to a file forces a full hash. A verified variant directory holds exactly
the locked files: anything else (bytecode, a module, a library) is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kernlock._internal.lockfile.entries import LockedFile, LockedKernel, LockedVariant
from kernlock.errors import IntegrityError, KernlockError, MissingFilesError

if TYPE_CHECKING:
    pass

_CHUNK = 1 << 20
VENDOR_MARKER = ".kernlock-vendor"
REPAIR_CACHE = "kernlock sync --repair"  # restores the locked variants in the Hub cache


def hub_cache_dir() -> Path:
    """The cache directory kernels downloads into, read from the environment now.

    `KERNELS_CACHE`, else huggingface_hub's own rule: `HF_HUB_CACHE`, `HUGGINGFACE_HUB_CACHE`,
    `HF_HOME/hub`, `XDG_CACHE_HOME/huggingface/hub`, with `~` and `$VAR` expanded.
    """

    def expand(path: str) -> Path:
        return Path(os.path.expandvars(os.path.expanduser(path)))

    explicit = (
        os.environ.get("KERNELS_CACHE")
        or os.environ.get("HF_HUB_CACHE")
        or os.environ.get("HUGGINGFACE_HUB_CACHE")
    )
    if explicit:
        return expand(explicit)
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return expand(home) / "hub"


def repair_vendor_command(vendor: Path) -> str:
    """The command that restores damaged or missing variants in a vendor directory."""
    return f"kernlock vendor --repair {vendor}"


def vendored_variant_dir(kernel: LockedKernel, variant: str, vendor: Path) -> Path:
    """Where `kernlock vendor` puts a locked variant."""
    return vendor / repo_folder(kernel.repo) / kernel.commit / variant


def repo_folder(repo: str) -> str:
    """The cache folder name of a kernel repo (`kernels--org--name`)."""
    return "kernels--" + repo.replace("/", "--")


def variant_dir(kernel: LockedKernel, variant: str, cache: Path | None = None) -> Path:
    """Where a locked variant lives in the Hub cache."""
    return (
        (cache or hub_cache_dir())
        / repo_folder(kernel.repo)
        / "snapshots"
        / kernel.commit
        / "build"
        / variant
    )


# [st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns, sha256]: a file unchanged since it was hashed
FileKey = list


def file_key(info: os.stat_result, sha256: str) -> FileKey:
    """What says a file is the one that was hashed to `sha256` (kept in stamps, compared on
    re-checks)."""
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, sha256]


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, streamed."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp_entry(kernel: LockedKernel, variant: str, root: Path) -> str:
    """The private-directory entry that remembers which files of `root` this user verified."""
    from kernlock._internal.fs.private import entry_name

    return entry_name("stamp", os.path.realpath(root), kernel.commit, variant)


def _read_stamp(entry: str) -> dict[str, list]:
    from kernlock._internal.fs.private import read_entry

    payload = read_entry(entry)
    try:
        data = json.loads(payload) if payload else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _write_stamp(entry: str, stamp: dict[str, list]) -> None:
    from kernlock._internal.fs.private import write_entry

    write_entry(entry, json.dumps(stamp, sort_keys=True).encode())


def missing_files(kernel: LockedKernel, variant: LockedVariant, root: Path) -> list[LockedFile]:
    """Locked files that are absent under `root` (a variant directory)."""
    return [f for f in variant.files if not (root / f.path).is_file()]


def extra_files(variant: LockedVariant, root: Path, *, bytecode: bool = False) -> list[str]:
    """Entries under `root` that the lock does not list (modules, libraries, links, directories),
    sorted.

    Directories count only as the parents of locked files. A `__pycache__` holding
    only `.pyc` files is inert — kernlock never reads bytecode from a variant
    (`kernlock._internal.runtime.importguard`) — and is listed only with `bytecode`.
    """
    locked = {f.path for f in variant.files}
    parents = {str(Path(p).parent) for p in locked} | {"."}
    parents |= {str(parent) for p in parents for parent in Path(p).parents}
    extra = []
    for directory, dirnames, filenames in os.walk(root):
        relative = os.path.relpath(directory, root)
        prefix = "" if relative == "." else relative + "/"
        for name in list(dirnames):
            path = os.path.join(directory, name)
            dirnames.remove(name)
            if prefix + name in parents and not os.path.islink(path):
                dirnames.append(name)
            elif bytecode or not _only_bytecode(path):
                extra.append(prefix + name + "/")
        extra.extend(prefix + name for name in filenames if prefix + name not in locked)
    return sorted(extra)


def _only_bytecode(directory: str) -> bool:
    """Whether `directory` is a real `__pycache__` holding nothing but regular `.pyc` files."""
    if os.path.basename(directory) != "__pycache__" or os.path.islink(directory):
        return False
    with os.scandir(directory) as entries:
        return all(e.name.endswith(".pyc") and e.is_file(follow_symlinks=False) for e in entries)


def remove_extra_files(root: Path, extra: list[str]) -> None:
    """Delete what `extra_files` found under `root` (never following a link out of it)."""
    for relative in extra:
        path = root / relative.rstrip("/")
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def unlisted_files_error(
    kernel: LockedKernel,
    root: Path,
    extra: list[str],
    repair: str = REPAIR_CACHE,
    in_commit: bool | None = None,
) -> IntegrityError:
    """The refusal of a variant directory holding files the lock does not list (`extra`, from
    `extra_files`).

    In a vendor directory (kernlock's own), `repair` removes them. In the shared Hub cache nothing
    is deleted: a file the lock does not list may be a real part of the commit (the lock lost it by
    a hand edit) that plain kernels and other projects rely on. `in_commit` says whether the Hub
    lists them at the locked commit (None: not asked): True, the lock is what is wrong; False, they
    were put there by hand and are deleted by hand.
    """
    import shlex

    names = ", ".join(extra[:3]) + ("…" if len(extra) > 3 else "")
    problem = (
        f"{kernel.spec}: {root} holds {len(extra)} file(s) that kernels.lock does not list "
        f"({names})"
    )
    relock = f"`kernlock lock -P {kernel.repo}`"
    if repair != REPAIR_CACHE:
        return IntegrityError(
            f"{problem}; they could run instead of the locked code",
            fix=f"remove them with `{repair}`",
        )
    if in_commit:
        return IntegrityError(
            f"{problem}, which commit {kernel.commit[:12]} holds on the Hub: kernels.lock lost "
            "them (a hand edit); they stay in the shared cache",
            fix=f"restore the lock's entry with {relock}",
        )
    if in_commit is False:
        paths = shlex.join(str(root / path.rstrip("/")) for path in extra)
        return IntegrityError(
            f"{problem}, which commit {kernel.commit[:12]} does not hold on the Hub (put there by "
            "hand or another tool); kernlock deletes nothing from the shared cache",
            fix=f"delete them: `rm -r -- {paths}`",
        )
    return IntegrityError(
        f"{problem}; they could run instead of the locked code",
        fix=f"if kernels.lock lost them by a hand edit, restore its entry with {relock}; "
        f"files the commit does not hold (`{repair}` names them) are deleted by hand",
    )


def check_variant(
    kernel: LockedKernel,
    variant: LockedVariant,
    root: Path,
    stamped: bool = False,
    repair: str = REPAIR_CACHE,
    just_verified: Mapping[str, FileKey] | None = None,
) -> None:
    """Raise `IntegrityError` unless `root` holds exactly the locked files, each matching the lock.

    With `stamped`, files whose device, inode, size, mtime and ctime match what this
    user verified before (a signed stamp in kernlock's private directory) are not
    re-hashed; nor are those in `just_verified` (what `download_variant` hashed as the bytes
    arrived) while their key is unchanged. `repair` is the command that restores `root` (the
    Hub cache's by default; `repair_vendor_command` for a vendor directory), named in the
    error. The first of `variant_problems` is raised.
    """
    problems = variant_problems(kernel, variant, root, stamped, repair, just_verified)
    if problems:
        raise problems[0]


def variant_problems(
    kernel: LockedKernel,
    variant: LockedVariant,
    root: Path,
    stamped: bool = False,
    repair: str = REPAIR_CACHE,
    just_verified: Mapping[str, FileKey] | None = None,
) -> list[KernlockError]:
    """Every way `root` differs from the locked variant, one error each.

    Files the lock does not list (one `IntegrityError` naming them), then each missing
    locked file (`MissingFilesError`), then each file whose size or sha256 differs
    (`IntegrityError`). The stamp is written only when there is no problem.
    """
    problems: list[KernlockError] = []
    extra = extra_files(variant, root)
    if extra:
        problems.append(unlisted_files_error(kernel, root, extra, repair))
    entry = _stamp_entry(kernel, variant.name, root) if stamped else None
    stamp = _read_stamp(entry) if entry else {}
    fresh: dict[str, FileKey] = {}
    mismatched: list[IntegrityError] = []
    for locked in variant.files:
        path = root / locked.path
        try:
            info = path.stat()
        except FileNotFoundError:
            problems.append(
                MissingFilesError(
                    f"{kernel.spec}: {variant.name}/{locked.path} is missing from {root}",
                    fix=f"run `{repair}` to restore it",
                )
            )
            continue
        key = file_key(info, locked.sha256)
        if stamp.get(locked.path) == key or (just_verified or {}).get(locked.path) == key:
            fresh[locked.path] = key
            continue
        actual = (
            sha256_file(path)
            if info.st_size == locked.size
            else f"(size {info.st_size}, expected {locked.size})"
        )
        if actual != locked.sha256:
            mismatched.append(
                IntegrityError(
                    f"{kernel.spec}: {variant.name}/{locked.path} does not match kernels.lock "
                    f"(expected sha256 {locked.sha256}, found {actual})",
                    fix=f"run `{repair}` to restore it, or `kernlock lock -P {kernel.repo}` "
                    "if the lock is what is wrong",
                )
            )
            continue
        fresh[locked.path] = key
    problems.extend(mismatched)
    if entry and not problems and fresh != stamp:
        _write_stamp(entry, fresh)
    return problems
