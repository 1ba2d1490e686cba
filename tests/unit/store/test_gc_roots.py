"""GC roots in a Hub cache (`kernlock._internal.store.gc_roots`): what huggingface_hub's scan reads of them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernlock._internal.store.gc_roots import Root, add_root, remove_root, roots
from kernlock.errors import WriteError

COMMIT = "c" * 40


def cache_with_snapshot(tmp_path: Path) -> tuple[Path, Root]:
    cache = tmp_path / "hub"
    (cache / "kernels--org--repo" / "snapshots" / COMMIT).mkdir(parents=True)
    return cache, Root("kernels--org--repo", COMMIT, "0123456789abcdef")


def test_a_root_is_the_bare_sha_readable_as_the_umask_allows_and_goes_again(tmp_path: Path) -> None:
    cache, root = cache_with_snapshot(tmp_path)
    assert add_root(cache, root)
    path = cache / "kernels--org--repo" / "refs" / "kernlock" / root.lock_id / COMMIT
    assert path.read_bytes() == COMMIT.encode()  # huggingface_hub reads the whole file as the commit: no newline
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert roots(cache) == [root] and root.repo == "org/repo"
    assert sorted(p.name for p in (cache / "kernels--org--repo").iterdir()) == ["refs", "snapshots"]  # no temporary
    remove_root(cache, root)
    assert roots(cache) == [] and not path.parent.exists()


def test_no_root_without_the_snapshot(tmp_path: Path) -> None:
    cache, root = cache_with_snapshot(tmp_path)
    assert not add_root(cache, Root(root.folder, "d" * 40, root.lock_id))  # a ref to a missing commit corrupts the repo
    assert not (cache / root.folder / "refs").exists()


def test_a_failed_write_leaves_nothing_below_refs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary file lives in the repo folder, which huggingface_hub's scan does not read, and goes on failure."""
    cache, root = cache_with_snapshot(tmp_path)

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(KeyboardInterrupt):
        add_root(cache, root)
    assert [p for p in (cache / root.folder / "refs").rglob("*") if p.is_file()] == []
    assert sorted(p.name for p in (cache / root.folder).iterdir()) == ["refs", "snapshots"]


def test_a_link_on_the_way_is_refused(tmp_path: Path) -> None:
    cache, root = cache_with_snapshot(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (cache / root.folder / "refs").symlink_to(elsewhere)
    with pytest.raises(WriteError, match="it is a symbolic link"):
        add_root(cache, root)
    assert list(elsewhere.iterdir()) == []


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
