"""GC roots in the Hub cache: a ref per lock and locked commit, so `hf cache prune` keeps them.

huggingface_hub 2.4's cache scan (`scan_cache_dir`, behind `hf cache ls` and
`hf cache prune`) reads every file below a repo folder's `refs/` (`refs/**/*`) as a
ref to the commit it holds (read whole, nothing stripped), and `hf cache prune`
deletes only the revisions no ref points at. kernlock's roots are
`kernels--org--repo/refs/kernlock/<lock id>/<commit>`, holding the commit: nested
under `kernlock/`, they never replace `refs/main`, a version ref kernels records
(`refs/v4`) or a user's ref, and kernels' own offline lookup of a version
(`refs/v<N>`, top-level files only) never reads them. A root is written only while
the commit's snapshot is in the cache: huggingface_hub's scan reports a repo with a
ref to a missing snapshot as corrupted (and `hf cache prune` skips it).
"""

from __future__ import annotations

import hashlib
import os
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path, PurePath

from kernlock._internal.store.hub_cache import repo_folder

NAMESPACE = "kernlock"  # refs/kernlock/<lock id>/<commit>
_FOLDER_PREFIX = "kernels--"


@dataclass(frozen=True, order=True)
class Root:
    """One root: lock `lock_id` keeps `commit` of the kernel repo cached in `folder`."""

    folder: str  # kernels--org--repo
    commit: str
    lock_id: str

    @property
    def repo(self) -> str:
        """The repo id (`org/repo`)."""
        return repo_of(self.folder)

    def ref(self) -> str:
        """The ref's name as `hf cache ls` shows it."""
        return f"{NAMESPACE}/{self.lock_id}/{self.commit}"


def repo_of(folder: str) -> str:
    """The repo id (`org/repo`) of a cache folder (`kernels--org--repo`)."""
    return folder.removeprefix(_FOLDER_PREFIX).replace("--", "/", 1)


def lock_id(lock_path: str | os.PathLike[str]) -> str:
    """A lock's identity in root names: 16 hex digits of the sha256 of its real path."""
    return hashlib.sha256(os.path.realpath(lock_path).encode()).hexdigest()[:16]


def root_for(repo: str, commit: str, lock: str) -> Root:
    """The root of lock id `lock` for `commit` of `repo`."""
    return Root(repo_folder(repo), commit, lock)


def snapshot_present(cache: Path, folder: str, commit: str) -> bool:
    """Whether the cache holds a snapshot directory of `commit`."""
    return (cache / folder / "snapshots" / commit).is_dir()


def add_root(cache: Path, root: Root) -> bool:
    """Write `root` (created, never through a link; readable as the umask allows, as
    huggingface_hub's refs are); False, and nothing written, when the commit has no snapshot."""
    from kernlock._internal.fs.inside import write_inside

    if not snapshot_present(cache, root.folder, root.commit):
        return False
    path = cache / root.folder / "refs" / NAMESPACE / root.lock_id / root.commit
    with suppress(OSError):
        if path.read_text(encoding="ascii") == root.commit:
            return True
    # staged in the repo folder, which huggingface_hub's scan never reads: a temporary file below
    # refs/ would be read as a ref (an empty one, or another user's unreadable one)
    below = PurePath(root.folder, "refs", NAMESPACE, root.lock_id)
    write_inside(cache, root.commit, root.commit, below, staging=PurePath(root.folder))
    return True


def remove_root(cache: Path, root: Root) -> None:
    """Remove `root` (and its lock's directory once empty), never following a link."""
    from kernlock._internal.fs.inside import directory

    below = PurePath(root.folder, "refs", NAMESPACE)
    with directory(cache, below) as fd:
        with suppress(FileNotFoundError):
            os.unlink(f"{root.lock_id}/{root.commit}", dir_fd=fd)
        with suppress(OSError):  # not empty: the lock keeps other commits of the repo
            os.rmdir(root.lock_id, dir_fd=fd)


def roots(cache: Path) -> list[Root]:
    """Every kernlock root in the cache, of every lock (sorted)."""
    found = []
    for refs in sorted(cache.glob(f"{_FOLDER_PREFIX}*/refs/{NAMESPACE}")):
        folder = refs.parent.parent.name
        for path in sorted(refs.glob("*/*")):
            if path.is_file() and not path.is_symlink():
                found.append(Root(folder, path.name, path.parent.name))
    return found


def other_refs(cache: Path, folder: str) -> dict[str, set[str]]:
    """The repo's refs that are not kernlock's (`main`, `v4`, a user's), by the commit they
    name."""
    refs = cache / folder / "refs"
    named: dict[str, set[str]] = {}
    for path in refs.glob("**/*"):
        relative = path.relative_to(refs).as_posix()
        if relative.split("/", 1)[0] == NAMESPACE or not path.is_file():
            continue
        with suppress(OSError, UnicodeDecodeError):
            named.setdefault(path.read_text(encoding="ascii").strip(), set()).add(relative)
    return named


def snapshot_size(cache: Path, folder: str, commit: str) -> int:
    """Bytes of the files of a cached commit (each blob counted once)."""
    blobs: dict[str, int] = {}
    for path in (cache / folder / "snapshots" / commit).rglob("*"):
        with suppress(OSError):
            if path.is_file():
                blobs[os.path.realpath(path)] = path.stat().st_size
    return sum(blobs.values())
