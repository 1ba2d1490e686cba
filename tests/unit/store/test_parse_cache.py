"""The parsed-lock cache: hits only for identical bytes and code, never hides a broken lock."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from helpers import big_lock
from kernlock._internal.lockfile import parse_cache
from kernlock._internal.lockfile import serialize as lockfile_toml
from kernlock._internal.lockfile.serialize import load_lockfile, write_lockfile
from kernlock.errors import LockfileError


def _forbid_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(*args, **kwargs):
        raise AssertionError("parsed although the cache holds these bytes")

    monkeypatch.setattr(lockfile_toml, "parse_lockfile", parse)


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("parsed-*"))


def test_written_lock_is_loaded_without_parsing(tmp_path: Path, private_kernlock_cache: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    lock, path = big_lock(), tmp_path / "kernels.lock"
    assert len(lockfile_toml.dumps_lockfile(lock)) > parse_cache.MIN_CACHED_BYTES
    write_lockfile(lock, path)
    assert len(entries(private_kernlock_cache)) == 1
    _forbid_parsing(monkeypatch)
    assert load_lockfile(path) == lock


def test_edited_lock_is_parsed_again_and_errors_are_never_cached(tmp_path: Path, private_kernlock_cache: Path) -> None:
    path = tmp_path / "kernels.lock"
    write_lockfile(big_lock(), path)
    text = path.read_text()
    path.write_text(text.replace('version = 1\n', 'version = 1\nsurprise = 1\n', 1))
    for _ in range(2):
        with pytest.raises(LockfileError, match="surprise"):
            load_lockfile(path)
    assert len(entries(private_kernlock_cache)) == 1  # only the good lock's entry
    path.write_text(text.replace("org/kernel-000", "org/kernel-xyz"))
    assert load_lockfile(path).kernels[0].repo == "org/kernel-xyz"
    assert len(entries(private_kernlock_cache)) == 2


def test_corrupt_entry_is_a_miss(tmp_path: Path, private_kernlock_cache: Path) -> None:
    lock, path = big_lock(), tmp_path / "kernels.lock"
    write_lockfile(lock, path)
    (entry,) = entries(private_kernlock_cache)
    entry.write_bytes(entry.read_bytes()[:100])
    assert load_lockfile(path) == lock
    assert load_lockfile(path) == lock  # re-stored, now a hit


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_entries_in_a_directory_others_can_write_are_ignored(tmp_path: Path, private_kernlock_cache: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kernels.lock"
    write_lockfile(big_lock(), path)
    private_kernlock_cache.chmod(0o777)
    calls = []
    original = lockfile_toml.parse_lockfile
    monkeypatch.setattr(lockfile_toml, "parse_lockfile", lambda *a, **k: calls.append(1) or original(*a, **k))  # type: ignore[func-returns-value]  # append: None, then the call
    load_lockfile(path)
    assert calls == [1]


def test_no_cache_switch_and_small_locks_write_nothing(tmp_path: Path, private_kernlock_cache: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    write_lockfile(big_lock(kernels=1, variants=1), tmp_path / "small.lock")
    load_lockfile(tmp_path / "small.lock")
    assert not entries(private_kernlock_cache)
    monkeypatch.setenv("KERNLOCK_NO_CACHE", "1")
    write_lockfile(big_lock(), tmp_path / "kernels.lock")
    load_lockfile(tmp_path / "kernels.lock")
    assert not entries(private_kernlock_cache)


def test_other_parsing_code_does_not_read_entries(tmp_path: Path, private_kernlock_cache: Path) -> None:
    """Another kernlock (an upgrade rewrites the parsing modules) parses afresh: an entry is keyed by the
    size and mtime of the code that parsed it."""
    path = tmp_path / "kernels.lock"
    write_lockfile(big_lock(), path)
    load_lockfile(path)
    assert len(entries(private_kernlock_cache)) == 1
    code = Path(str(sys.modules["kernlock._internal.lockfile.table"].__file__))
    before = code.stat()
    os.utime(code, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    try:
        load_lockfile(path)
    finally:
        os.utime(code, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert len(entries(private_kernlock_cache)) == 2


def test_oldest_entries_are_pruned(tmp_path: Path, private_kernlock_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse_cache, "MAX_ENTRIES", 3)
    for n in range(5):
        write_lockfile(big_lock(kernels=20 + n), tmp_path / f"{n}.lock")
    assert len(entries(private_kernlock_cache)) == 3


@pytest.mark.parametrize("module", parse_cache.PARSING_CODE)
def test_edited_parsing_code_does_not_read_entries(tmp_path: Path, private_kernlock_cache: Path, module: str) -> None:
    path = tmp_path / "kernels.lock"
    write_lockfile(big_lock(), path)
    code = Path(str(sys.modules[module].__file__))
    info = code.stat()
    try:
        os.utime(code, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))  # as an edit would
        load_lockfile(path)
    finally:
        os.utime(code, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert len(entries(private_kernlock_cache)) == 2
