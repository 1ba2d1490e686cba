"""Stamps and parsed locks cannot be forged, poisoned or swapped in by someone else."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
from pathlib import Path

import kernels
import pytest

import kernlock
from helpers import FA2, LockedProjectFactory, big_lock, clear_loaded_kernels, cli
from kernlock._internal.fs import private
from kernlock._internal.lockfile.serialize import load_lockfile, write_lockfile
from kernlock._internal.runtime.apply import release
from kernlock._internal.store import hub_cache as cache
from kernlock.errors import IntegrityError

ATTACKER = 65534  # nobody
needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")


class RunsCode:
    """A pickle that creates `marker` when loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def poison(directory: Path, forged_sha: str, marker: Path, key: bytes | None = None) -> None:
    """Rewrite every cache entry under `directory`: pickles run code, JSON entries carry `forged_sha`.

    With `key`, JSON entries are re-signed with it (an attacker's own key file goes beside them).
    """
    for path in [p for p in directory.rglob("*") if p.is_file() and p.name != "key"]:
        data = path.read_bytes()
        if path.suffix == ".pickle":
            path.write_bytes(pickle.dumps(RunsCode(marker)))
            continue
        try:
            text = json.loads(data[32:])
        except ValueError:
            continue
        if not isinstance(text, dict) or "kernels" not in text:
            continue  # not a parsed lock
        forged = json.dumps(text).replace(text["kernels"][0]["variants"][0]["files"][0]["sha256"], forged_sha).encode()
        mac = private._mac(key, path.name, forged) if key else data[:32]
        path.write_bytes(mac + forged)
    if key:
        (directory / "key").write_bytes(key)


@pytest.fixture
def cached_lock(tmp_path: Path) -> tuple[Path, str]:
    """A big lock whose parse is cached; returns its path and its first file's sha256."""
    lock, path = big_lock(), tmp_path / "kernels.lock"
    write_lockfile(lock, path)
    return path, lock.kernels[0].variants[0].files[0].sha256


def test_an_edited_parse_cache_entry_cannot_change_the_hashes(cached_lock, private_kernlock_cache: Path,
                                                              tmp_path: Path) -> None:
    path, genuine = cached_lock
    marker = tmp_path / "ran"
    forged = "f" * 64
    for entry in [p for p in private_kernlock_cache.rglob("*") if p.is_file() and p.name != "key"]:
        data = entry.read_bytes()
        if genuine.encode() in data:  # same length: the entry stays well-formed
            entry.write_bytes(data.replace(genuine.encode(), forged.encode()))
    assert load_lockfile(path).kernels[0].variants[0].files[0].sha256 == genuine
    poison(private_kernlock_cache, forged, marker)
    assert load_lockfile(path).kernels[0].variants[0].files[0].sha256 == genuine
    assert not marker.exists()


def test_an_entry_copied_from_another_cache_vouches_for_nothing(cached_lock, private_kernlock_cache: Path,
                                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, genuine = cached_lock
    theirs = tmp_path / "theirs"
    shutil.copytree(private_kernlock_cache, theirs)
    poison(theirs, "f" * 64, tmp_path / "ran", key=os.urandom(32))  # validly signed, with their key
    for entry in theirs.iterdir():
        if entry.name != "key":
            shutil.copyfile(entry, private_kernlock_cache / entry.name)
    assert load_lockfile(path).kernels[0].variants[0].files[0].sha256 == genuine


def test_a_symlinked_or_shared_cache_directory_is_not_used(cached_lock, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = cached_lock
    link = tmp_path / "link"
    link.symlink_to(os.environ["KERNLOCK_CACHE_DIR"])
    monkeypatch.setenv("KERNLOCK_CACHE_DIR", str(link))
    assert private.read_entry("anything") is None and not private.write_entry("anything", b"x")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o1777)
    monkeypatch.setenv("KERNLOCK_CACHE_DIR", str(shared))
    assert not private.write_entry("anything", b"x")
    assert list(shared.iterdir()) == []


def test_one_opener_guards_both_private_directories(tmp_path: Path) -> None:
    """`open_private_dir` creates 0700, accepts a directory only its owner can write, refuses the rest."""
    fd = private.open_private_dir(tmp_path / "made" / "here")
    try:
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o700 & ~_umask()
        os.close(private.open_private_dir("inner", fd))  # a name inside an opened one
    finally:
        os.close(fd)
    readable = tmp_path / "readable"
    readable.mkdir(mode=0o755)
    os.close(private.open_private_dir(readable))
    readable.chmod(0o775)
    with pytest.raises(private.NotPrivateError, match="writable by other users"):
        private.open_private_dir(readable)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "made")
    with pytest.raises(OSError):
        private.open_private_dir(link)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@needs_root
def test_swapping_the_cache_directory_between_check_and_use_changes_nothing(
    cached_lock, private_kernlock_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another user swaps the (victim-owned) cache directory for theirs right after each ownership check."""
    path, genuine = cached_lock
    marker = tmp_path / "ran"
    evil = tmp_path / "evil"
    shutil.copytree(private_kernlock_cache, evil)
    poison(evil, "f" * 64, marker, key=os.urandom(32))
    for item in [evil, *evil.rglob("*")]:
        os.chown(item, ATTACKER, ATTACKER)
    aside = tmp_path / "aside"

    state = {"evil_in_place": False, "swaps": 0}

    def swap() -> None:
        state["swaps"] += 1
        if not state["evil_in_place"]:
            private_kernlock_cache.rename(aside)
            evil.rename(private_kernlock_cache)
        else:
            private_kernlock_cache.rename(evil)
            aside.rename(private_kernlock_cache)
        state["evil_in_place"] = not state["evil_in_place"]

    def swapping(original):
        def checked(*args, **kwargs):
            result = original(*args, **kwargs)
            if isinstance(result, os.stat_result) and stat.S_ISDIR(result.st_mode):
                swap()  # the race, won every time
            return result
        return checked

    private._opened.clear()
    monkeypatch.setattr(os, "stat", swapping(os.stat))
    monkeypatch.setattr(os, "fstat", swapping(os.fstat))
    for _ in range(4):
        assert load_lockfile(path).kernels[0].variants[0].files[0].sha256 == genuine
    monkeypatch.undo()
    assert state["swaps"] >= 1  # the race was run
    assert not marker.exists()


def forge_stamps(directories: list[Path], blob: Path) -> int:
    """Rewrite every verified-file stamp kernlock keeps to vouch for `blob` as it is now; return how many."""
    info = blob.stat()
    forged = 0
    for directory in directories:
        stamps = [p for p in directory.rglob("*") if p.is_file() and (".kernlock" in p.parts or p.name.startswith("stamp-"))]
        for path in stamps:
            data = path.read_bytes()
            mac, payload = (b"", data) if path.suffix == ".json" else (data[:32], data[32:])
            try:
                stamp = json.loads(payload)
            except ValueError:
                continue
            for key, value in stamp.items():
                if len(value) == 5:  # (size, mtime, ctime, inode, sha256)
                    stamp[key] = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, value[4]]
                else:  # (device, inode, size, mtime, ctime, sha256)
                    stamp[key] = [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, value[5]]
            path.write_bytes(mac + json.dumps(stamp, sort_keys=True).encode())
            forged += 1
    return forged


def test_a_forged_stamp_does_not_vouch_for_a_tampered_file(locked_project: LockedProjectFactory,
                                                          private_kernlock_cache: Path) -> None:
    project, lock = locked_project([f"{FA2}@v2"])
    [entry] = lock.kernels
    variant = entry.variant_for(lock.targets[0])
    kernlock.apply(project / "kernels.lock")
    try:
        kernels.get_kernel(FA2, version=2)  # verified and stamped
        target = next(f for f in variant.files if f.path.endswith("_ops.so"))
        blob = (cache.variant_dir(entry, variant.name) / target.path).resolve()
        data = bytearray(blob.read_bytes())
        data[10] ^= 0xFF
        blob.write_bytes(bytes(data))
        assert forge_stamps([cache.hub_cache_dir(), private_kernlock_cache], blob) >= 1
        clear_loaded_kernels()
        with pytest.raises(IntegrityError, match=target.path):
            kernels.get_kernel(FA2, version=2)
        verified = kernlock.verify(project, cache=True)
        assert not verified.check("cache").ok
    finally:
        release()


def test_stamps_from_another_users_cache_are_not_trusted(locked_project: LockedProjectFactory, tmp_path: Path,
                                                        private_kernlock_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project, lock = locked_project([f"{FA2}@v2"])
    assert kernlock.verify(project, cache=False).ok
    assert cli("sync", cwd=project).exit_code == 0
    assert kernlock.verify(project, cache=True).ok  # stamps written
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    for entry in private_kernlock_cache.iterdir():
        if entry.name != "key":
            shutil.copyfile(entry, theirs / entry.name)
    monkeypatch.setenv("KERNLOCK_CACHE_DIR", str(theirs))
    hashed: list[Path] = []
    original = cache.sha256_file
    monkeypatch.setattr(cache, "sha256_file", lambda p: hashed.append(p) or original(p))  # type: ignore[func-returns-value]  # append: None, then the call
    assert kernlock.verify(project, cache=True).ok
    assert hashed  # nothing vouched: every file was hashed again
