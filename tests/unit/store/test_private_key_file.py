"""The private cache's key file (issue 28 item 17): an empty one left by a crash is repaired, an unusable one is said
once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def fresh_private(private_kernlock_cache: Path):
    """The private cache directory, with no directory opened by this process yet."""
    from kernlock._internal.fs import private

    def forget() -> None:
        for fd, _ in private._opened.values():
            os.close(fd)
        private._opened.clear()
        getattr(private, "_said", set()).clear()

    forget()
    yield private
    forget()


def test_an_empty_key_file_left_by_a_crash_is_repaired(fresh_private, private_kernlock_cache: Path) -> None:
    private_kernlock_cache.mkdir(mode=0o700)
    key = private_kernlock_cache / "key"
    key.touch(mode=0o600)  # a crash between creating the key file and writing it
    assert fresh_private.write_entry("probe", b"payload")  # was: False, for good (the cache silently off)
    assert len(key.read_bytes()) == 32 and key.stat().st_mode & 0o777 == 0o600
    fresh_private._opened.clear()
    assert fresh_private.read_entry("probe") == b"payload"
    assert not [p.name for p in private_kernlock_cache.iterdir() if p.name.endswith(".tmp")]


def test_an_unusable_key_file_is_said_once(fresh_private, private_kernlock_cache: Path, capsys) -> None:
    private_kernlock_cache.mkdir(mode=0o700)
    key = private_kernlock_cache / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)  # readable by other users: it vouches for nothing, and kernlock must not rewrite it
    for _ in range(3):
        assert not fresh_private.write_entry("probe", b"payload")
        assert fresh_private.read_entry("probe") is None
    err = capsys.readouterr().err
    assert err.count("kernlock: warning:") == 1, err
    assert f"the private cache {private_kernlock_cache} is off: its key file is readable by other users" in err
    assert f"remove {key}" in err
    key.unlink()  # the fix the warning names
    assert fresh_private.write_entry("probe", b"payload")
