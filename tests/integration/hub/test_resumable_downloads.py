"""Resumable downloads (issue 28 item 20): a partial is kept under its private `.incomplete` name and continued
with `Range`/`If-Range` while the server's validator is unchanged; the whole file is checked before it is visible."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import FA2, LockedProjectFactory
from kernlock._internal.fetch.download import download_variant
from kernlock._internal.fetch.partial import validator_path
from kernlock._internal.lockfile.entries import LockedFile, LockedKernel, LockedVariant
from kernlock._internal.store.hub_cache import hub_cache_dir, repo_folder, sha256_file, variant_dir
from kernlock.testing.hub import TestHub

FA2_V4 = f"{FA2}@v4"  # pinned: the same build with or without Transformers' default table (the matrix's kernels-only cells)


def _largest(locked_project: LockedProjectFactory) -> tuple[LockedKernel, LockedVariant, LockedFile]:
    project = locked_project([FA2_V4])
    kernel = project.lock.kernels[0]
    variant = kernel.variant_for(project.lock.targets[0])
    assert variant is not None
    return kernel, variant, max((f for f in variant.files if f.path.endswith(".so")), key=lambda f: f.size)  # LFS: CDN


def _blobs(kernel: LockedKernel) -> Path:
    return hub_cache_dir() / repo_folder(kernel.repo) / "blobs"


def _cdn_gets(hub: TestHub) -> list[tuple[str, str | None, str | None]]:
    return [entry for entry in hub.ranges if entry[0].startswith("/cdn/")]


def _leave_partial(hub: TestHub, kernel: LockedKernel, variant: LockedVariant, locked: LockedFile, after: int) -> Path:
    """A first run that loses its connection after `after` bytes, then is refused: the partial stays."""
    hub.add_fault("reset", match=r"^/cdn/", after=after)
    hub.add_fault("status", match=r"^/cdn/", code=403)
    try:
        download_variant(kernel, variant, hub_cache_dir(), [locked])
    except Exception:
        pass
    else:
        raise AssertionError("the download should have failed")
    hub._faults.clear()
    partials = list(_blobs(kernel).glob(f"{locked.sha256}.*.incomplete"))
    assert len(partials) == 1 and partials[0].stat().st_size == after
    assert validator_path(partials[0]).is_file()
    return partials[0]


def test_reset_mid_body_resumes_within_one_run(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    kernel, variant, locked = _largest(locked_project)
    after = locked.size // 3
    hub.reset_counts()
    hub.add_fault("reset", match=r"^/cdn/", after=after)
    download_variant(kernel, variant, hub_cache_dir(), [locked])
    target = variant_dir(kernel, variant.name) / locked.path
    assert sha256_file(target) == locked.sha256
    gets = _cdn_gets(hub)
    assert [(r, bool(i)) for _, r, i in gets] == [(None, False), (f"bytes={after}-", True)]
    assert hub.cdn_bytes_sent == locked.size  # the bytes before the reset were not sent again
    assert not list(_blobs(kernel).glob("*incomplete*"))


def test_next_run_resumes_a_kept_partial(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    kernel, variant, locked = _largest(locked_project)
    after = locked.size // 2
    _leave_partial(hub, kernel, variant, locked, after)
    hub.reset_counts()
    download_variant(kernel, variant, hub_cache_dir(), [locked])
    assert sha256_file(variant_dir(kernel, variant.name) / locked.path) == locked.sha256
    assert [r for _, r, _ in _cdn_gets(hub)] == [f"bytes={after}-"]
    assert hub.cdn_bytes_sent == locked.size - after


def test_changed_validator_restarts_from_zero(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    kernel, variant, locked = _largest(locked_project)
    _leave_partial(hub, kernel, variant, locked, locked.size // 2)
    hub.cdn_etag_salt = b"re-uploaded"
    hub.reset_counts()
    download_variant(kernel, variant, hub_cache_dir(), [locked])
    assert sha256_file(variant_dir(kernel, variant.name) / locked.path) == locked.sha256
    gets = _cdn_gets(hub)
    assert len(gets) == 1 and gets[0][1] is not None  # asked for the rest, If-Range failed: a full 200
    assert hub.cdn_bytes_sent == locked.size


def test_corrupted_partial_is_dropped_and_started_over_once(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    kernel, variant, locked = _largest(locked_project)
    after = locked.size // 2
    partial = _leave_partial(hub, kernel, variant, locked, after)
    data = bytearray(partial.read_bytes())
    data[after // 2] ^= 0xFF
    partial.write_bytes(bytes(data))
    hub.reset_counts()
    download_variant(kernel, variant, hub_cache_dir(), [locked])
    assert sha256_file(variant_dir(kernel, variant.name) / locked.path) == locked.sha256
    assert [r for _, r, _ in _cdn_gets(hub)] == [f"bytes={after}-", None]  # resumed, mismatch, from 0 once
    assert hub.cdn_bytes_sent == locked.size - after + locked.size
    assert not list(_blobs(kernel).glob("*incomplete*"))


def test_killed_sync_resumes_on_the_next_run(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    import random
    import signal
    import subprocess
    import sys
    import time

    kernel, variant, locked = _largest(locked_project)
    project = locked_project([FA2_V4])
    hub.cdn_pace = 0.01  # ~100 KiB/s: the kill lands mid-file
    hub.reset_counts()
    child = subprocess.Popen([sys.executable, "-m", "kernlock", "sync"], cwd=project.path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    point = random.randint(1, locked.size - 1024)
    partial: list[Path] = []
    until = time.monotonic() + 60
    while time.monotonic() < until and child.poll() is None:
        partial = list(_blobs(kernel).glob(f"{locked.sha256}.*.incomplete")) if _blobs(kernel).is_dir() else []
        if partial and partial[0].stat().st_size >= point:
            break
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    time.sleep(0.3)  # the CDN notices the client is gone
    assert partial, "the sync ended before it could be killed"
    kept = partial[0].stat().st_size
    assert 0 < kept < locked.size
    hub.cdn_pace = 0.0
    hub.reset_counts()
    done = subprocess.run([sys.executable, "-m", "kernlock", "sync"], cwd=project.path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    gets = [r for p, r, _ in _cdn_gets(hub) if locked.sha256 in p]
    assert gets == [f"bytes={kept}-"]
    sent = sum(n for p, n in hub.bytes_by_path.items() if locked.sha256 in p)
    assert sent == locked.size - kept  # only the remaining bytes were sent again
    assert sha256_file(variant_dir(kernel, variant.name) / locked.path) == locked.sha256


def test_a_sync_hashes_a_downloaded_file_once_and_a_changed_one_again(
    locked_project: LockedProjectFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bytes are hashed as they arrive; the check after `sync` trusts that hash only for the very file that was
    verified (same inode, size, mtime, ctime), so a big variant is read once, and a file swapped in between is not."""
    import kernlock._internal.store.hub_cache as cache
    from kernlock._internal.fetch import download
    from kernlock._internal.fetch.sync import sync_variant
    from kernlock.errors import IntegrityError

    kernel, variant, _ = _largest(locked_project)
    hashed: list[str] = []
    real_hash = cache.sha256_file
    monkeypatch.setattr(cache, "sha256_file", lambda path: hashed.append(Path(path).name) or real_hash(path))  # type: ignore[func-returns-value]  # append: None, then the call
    report = sync_variant(kernel, variant, hub_cache_dir(), repair=False)
    assert len(report.downloaded) == len(variant.files) and hashed == []
    report = sync_variant(kernel, variant, hub_cache_dir(), repair=False)  # nothing to fetch: all hashed, as before
    assert report.downloaded == [] and len(hashed) == len(variant.files)

    hashed.clear()
    real_download = download.download_variant

    def download_then_swap(*args: object, **kwargs: object) -> dict:
        keys = real_download(*args, **kwargs)  # type: ignore[arg-type]
        for path in keys:  # another writer replaces a verified file before the check
            target = variant_dir(kernel, variant.name) / path
            blob = target.resolve()
            blob.chmod(0o644)
            blob.write_bytes(b"swapped")
        return keys

    download.discard(kernel, variant.name, list(variant.files), hub_cache_dir())
    with pytest.raises(IntegrityError, match="does not match kernels.lock"):
        sync_variant(kernel, variant, hub_cache_dir(), repair=False, fetch=download_then_swap)


@pytest.mark.parametrize("exposure", ["group-writable", "hard-linked"])
def test_a_partial_others_could_write_is_not_resumed(hub: TestHub, locked_project: LockedProjectFactory,
                                                     exposure: str) -> None:
    """Only a partial nobody else can write is continued (the bytes hashed are the bytes kept): one of the user's own
    that the group may write (an older download under umask 002) or that has a second name is dropped, and the file
    is fetched from byte 0; kernlock's own partials are 0600."""
    import os

    kernel, variant, locked = _largest(locked_project)
    partial = _leave_partial(hub, kernel, variant, locked, locked.size // 2)
    assert partial.stat().st_mode & 0o777 == 0o600
    if exposure == "group-writable":
        partial.chmod(0o664)
    else:
        os.link(partial, partial.with_name("elsewhere"))
    hub.reset_counts()
    download_variant(kernel, variant, hub_cache_dir(), [locked])
    assert [r for _, r, _ in _cdn_gets(hub)] == [None] and hub.cdn_bytes_sent == locked.size
    assert sha256_file(variant_dir(kernel, variant.name) / locked.path) == locked.sha256
    assert not list(_blobs(kernel).glob("*incomplete*"))


def test_bytes_fetched_after_a_resume_counts_only_what_was_transferred(hub: TestHub,
                                                                       locked_project: LockedProjectFactory) -> None:
    import json

    from helpers import cli

    project = locked_project([FA2_V4])
    kernel = project.lock.kernels[0]
    variant = kernel.variant_for(project.lock.targets[0])
    assert variant is not None
    locked = max((f for f in variant.files if f.path.endswith(".so")), key=lambda f: f.size)
    after = locked.size // 2
    _leave_partial(hub, kernel, variant, locked, after)
    synced = cli("sync", "--json", cwd=project.path)  # was: every missing file counted whole, the resumed half included
    assert synced.exit_code == 0, synced.output
    assert json.loads(synced.output)["bytes"] == sum(f.size for f in variant.files) - after
