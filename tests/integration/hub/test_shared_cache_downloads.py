"""Downloads into a group-shared Hub cache (setgid 2775, umask 002, the usual team set-up) that another member of
the group can write: nothing kernlock writes follows a link or lands outside the cache, and a partial download
another user could write is never resumed, so the bytes hashed are the bytes that end up in the blob."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import CPU, FA2, LockedProjectFactory, cli
from kernlock._internal.fetch.download import download_variant, ensure_variant
from kernlock._internal.lockfile.entries import LockedFile, LockedKernel, LockedVariant
from kernlock._internal.store.hub_cache import hub_cache_dir, repo_folder, sha256_file
from kernlock.testing.hub import TestHub

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root and setpriv to act as a second member of the group")

MATE_UID, GROUP = 61001, 61000  # a second user in the cache's group (setpriv needs no passwd entry)
PREFIX = 2048  # the fixture .so is ~9 KiB (the round used 16 KiB of a real one)


@pytest.fixture
def shared_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A Hub cache every member of GROUP can write (setgid 2775), used with umask 002."""
    top = Path(tempfile.mkdtemp(prefix="kernlock-shared-"))
    top.chmod(0o755)
    cache = top / "hub"
    cache.mkdir()
    os.chown(cache, os.geteuid(), GROUP)
    cache.chmod(0o2775)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    previous = os.umask(0o002)
    try:
        yield cache
    finally:
        os.umask(previous)
        shutil.rmtree(top)


def _as_group_mate(script: str, *args: str) -> subprocess.Popen:
    """Start `script` as the other member of the cache's group (umask 002, as the team's set-up)."""
    return subprocess.Popen(
        ["setpriv", f"--reuid={MATE_UID}", f"--regid={GROUP}", "--clear-groups", sys.executable, "-c",
         "import os; os.umask(0o002)\n" + script, *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")


def _so(locked_project: LockedProjectFactory) -> tuple[Path, LockedKernel, LockedVariant, LockedFile]:
    project = locked_project([f"{FA2}@v4"], [CPU])
    kernel = project.lock.kernels[0]
    variant = kernel.variant_for(CPU)
    assert variant is not None
    locked = max((f for f in variant.files if f.path.endswith(".so")), key=lambda f: f.size)
    assert locked.size > 4 * PREFIX
    return project.path, kernel, variant, locked


def _blobs(kernel: LockedKernel) -> Path:
    return hub_cache_dir() / repo_folder(kernel.repo) / "blobs"


def _real_partial(hub: TestHub, kernel: LockedKernel, variant: LockedVariant, locked: LockedFile) -> tuple[bytes, str]:
    """The first PREFIX bytes of `locked` and the CDN's real ETag, as a dropped download leaves them (then removed)."""
    hub.add_fault("reset", match=r"^/cdn/", after=PREFIX)
    hub.add_fault("status", match=r"^/cdn/", code=403)
    # the cut download fails with whichever error the client raises there; only what it leaves behind is checked
    with pytest.raises(Exception):  # noqa: B017
        download_variant(kernel, variant, hub_cache_dir(), [locked])
    hub._faults.clear()
    [partial] = _blobs(kernel).glob(f"{locked.sha256}.*.incomplete")
    sidecar = partial.with_name(partial.name + "-validator")
    prefix, etag = partial.read_bytes(), sidecar.read_text()
    assert len(prefix) == PREFIX and etag.startswith('"')
    partial.unlink()
    sidecar.unlink()
    return prefix, etag


PLANT_LINKED_VALIDATOR = """
import sys
partial, target = sys.argv[1:]
with open(partial, "wb") as out:
    out.write(b"x" * 100)
os.symlink(target, partial + "-validator")
"""


@pytest.mark.parametrize("whose", ["a group member's partial", "the user's own partial"])
def test_a_validator_sidecar_that_is_a_symlink_is_never_written_through(
        hub: TestHub, locked_project: LockedProjectFactory, shared_cache: Path, tmp_path: Path, whose: str) -> None:
    """A group member plants `<sha256>.x.incomplete-validator -> ~victim/precious.txt` in the shared `blobs/` (next to
    their own partial, or next to one the user's killed run left): `sync` leaves precious.txt alone and still syncs."""
    project, kernel, variant, locked = _so(locked_project)
    precious = tmp_path / "victim" / "precious.txt"
    precious.parent.mkdir()
    precious.write_text("the user's own work\n")
    _blobs(kernel).mkdir(parents=True)
    partial = _blobs(kernel) / f"{locked.sha256}.0badf00d.incomplete"
    if whose == "the user's own partial":
        partial.write_bytes(b"x" * 100)
        script = "import sys; os.symlink(sys.argv[2], sys.argv[1] + '-validator')"
    else:
        script = PLANT_LINKED_VALIDATOR
    planted = _as_group_mate(script, str(partial), str(precious))
    planted.communicate(timeout=30)
    assert planted.returncode == 0
    assert Path(str(partial) + "-validator").is_symlink()

    result = cli("sync", cwd=project)
    assert precious.read_text() == "the user's own work\n"
    assert result.exit_code == 0, result.output
    root = ensure_variant(kernel, variant, offline=True)
    assert sha256_file(root / locked.path) == locked.sha256


REWRITE_AFTER_HASH = """
import json, select, sys, time
spec = json.loads(sys.stdin.readline())
prefix, evil = bytes.fromhex(spec["prefix"]), bytes.fromhex(spec["evil"])
fd = os.open(spec["partial"], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o664)
os.write(fd, prefix)
with open(spec["partial"] + "-validator", "w") as out:
    out.write(spec["etag"])
print("planted", flush=True)
until = time.monotonic() + 20
while time.monotonic() < until:
    if os.fstat(fd).st_size > len(prefix):  # the victim appends: it has hashed the prefix already
        os.pwrite(fd, evil, 0)
        print("rewrote", flush=True)
        break
    if select.select([sys.stdin], [], [], 0.0005)[0]:  # the test is done (stdin closed): stop waiting
        break
else:
    print("never resumed", flush=True)
sys.stdin.read()  # the fd stays open until the test ends
"""


def test_a_group_members_partial_download_is_never_resumed(
        hub: TestHub, locked_project: LockedProjectFactory, shared_cache: Path) -> None:
    """A group member plants the right first bytes of a locked `.so` and the CDN's real ETag as a partial, keeps an fd
    open and rewrites the prefix once the victim has hashed it and is appending. A cold load must not resume it: the
    file it verifies and loads holds the locked bytes, and so does every warm start after it."""
    _, kernel, variant, locked = _so(locked_project)
    prefix, etag = _real_partial(hub, kernel, variant, locked)
    evil = b"\x7fELF attacker" + bytes(PREFIX - 13)
    partial = _blobs(kernel) / f"{locked.sha256}.c0ffee00.incomplete"
    mate = _as_group_mate(REWRITE_AFTER_HASH)
    try:
        assert mate.stdin is not None and mate.stdout is not None
        mate.stdin.write(json.dumps({"partial": str(partial), "prefix": prefix.hex(), "evil": evil.hex(),
                                     "etag": etag}) + "\n")
        mate.stdin.flush()
        assert mate.stdout.readline().strip() == "planted", mate.stderr.read() if mate.stderr else ""
        assert partial.stat().st_uid == MATE_UID
        hub.cdn_pace = 0.02  # the rest arrives over a while: the rewrite lands mid-download
        root = ensure_variant(kernel, variant)  # a cold `apply()`: download, verify, stamp
        hub.cdn_pace = 0.0
        assert sha256_file(root / locked.path) == locked.sha256, "the verified file holds the group member's bytes"
        assert ensure_variant(kernel, variant, offline=True) == root  # the warm start
        assert sha256_file(root / locked.path) == locked.sha256
        assert (root / locked.path).resolve().stat().st_uid == os.geteuid()
    finally:
        if mate.stdin is not None:
            mate.stdin.close()
        mate.wait(timeout=30)


def test_a_symlinked_blobs_directory_is_refused_and_nothing_is_written_through_it(
        hub: TestHub, locked_project: LockedProjectFactory, shared_cache: Path, tmp_path: Path) -> None:
    """A group member replaces a repo's `blobs/` with a link to a directory of the user's: `sync` writes nothing there
    and says, in one line, what to remove."""
    project, kernel, _, _ = _so(locked_project)
    outside = tmp_path / "victim-dir"
    outside.mkdir()
    _blobs(kernel).parent.mkdir(parents=True)
    planted = _as_group_mate("import sys; os.symlink(sys.argv[1], sys.argv[2])", str(outside), str(_blobs(kernel)))
    planted.communicate(timeout=30)
    assert planted.returncode == 0 and _blobs(kernel).is_symlink()
    result = cli("sync", cwd=project)
    assert result.exit_code != 0
    lines = [line for line in result.output.strip().splitlines() if line.startswith("kernlock: error:")]
    assert len(lines) == 1 and f"{_blobs(kernel)} in the Hub cache is a link" in lines[0], result.output
    assert f"rm -- {_blobs(kernel)}" in lines[0]
    assert list(outside.iterdir()) == []
    fix = lines[0].split("`")[1]  # the printed fix, run as printed: it removes the link, not what it points to
    assert subprocess.run(fix, shell=True, timeout=30).returncode == 0
    assert outside.is_dir() and list(outside.iterdir()) == []
    assert cli("sync", cwd=project).exit_code == 0
    assert list(outside.iterdir()) == [] and _blobs(kernel).is_dir() and not _blobs(kernel).is_symlink()
