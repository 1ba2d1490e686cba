"""Real-Hub transport: CDN redirects, Xet listings, pagination, rate limits, stalls, endless bodies,
cache fidelity with huggingface_hub (blob names, modes, locks), repair and leftovers."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download

from helpers import CPU, FA2, LockedProjectFactory, cli, make_project
from kernlock._internal.fetch.download import discard
from kernlock._internal.store.hub_cache import hub_cache_dir, repo_folder, variant_dir
from kernlock.testing.hub import TestHub

SO = "flash_attn2/_ops.so"
FAST = {"HF_HUB_ETAG_TIMEOUT": "1", "HF_HUB_DOWNLOAD_TIMEOUT": "1", "KERNLOCK_HUB_DEADLINE": "2"}
GIVE_UP_WITHIN = 2 + 1 + 6  # the deadline, one read timeout, slack for a loaded machine

LOAD_SCRIPT = """
import sys
import kernels, kernlock
try:
    kernlock.apply()
    kernels.get_kernel("kernels-community/flash-attn2", version=2)
except Exception as error:
    sys.exit(f"{type(error).__name__}: {error}")
"""


def one_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


# ---------------------------------------------------------------- the test Hub behaves like the real one


def test_lfs_resolve_redirects_to_a_cdn_with_the_headers_split(hub: TestHub,
                                                               locked_project: LockedProjectFactory) -> None:
    _, lock = locked_project([f"{FA2}@v2"], [CPU])
    [kernel] = lock.kernels
    variant = kernel.variant_for(CPU)
    so = next(f for f in variant.files if f.path == SO)
    url = f"{hub.url}/kernels/{FA2}/resolve/{kernel.commit}/build/{variant.name}/{SO}"
    opener = urllib.request.build_opener(type("NoRedirect", (urllib.request.HTTPRedirectHandler,), {
        "redirect_request": lambda *args: None}))
    with pytest.raises(urllib.error.HTTPError) as redirect:
        opener.open(urllib.request.Request(url, method="HEAD"))
    headers = redirect.value.headers
    assert redirect.value.code == 302 and headers["Location"].startswith(hub.cdn_url) and hub.cdn_url != hub.url
    assert headers["X-Linked-Etag"] == f'"{so.sha256}"' and headers["X-Linked-Size"] == str(so.size)
    assert headers["X-Repo-Commit"] == kernel.commit
    with urllib.request.urlopen(headers["Location"]) as cdn:
        assert hashlib.sha256(cdn.read()).hexdigest() == so.sha256
        etag = cdn.headers["ETag"].strip('"')
        assert len(etag) == 64 and etag != so.sha256
        assert cdn.headers["X-Linked-Etag"] is None and cdn.headers["X-Repo-Commit"] is None
    assert hub.requests["cdn"] == 1


def test_tree_is_paginated_and_lists_xet_hashes(hub: TestHub) -> None:
    hub.tree_page_size = 5
    entries = list(HfApi().list_repo_tree(FA2, "build", recursive=True, revision="v2", repo_type="kernel"))
    assert len(entries) > 3 * 5 and hub.requests["tree"] == -(-len(entries) // 5)
    so_files = [e for e in entries if getattr(e, "lfs", None) is not None]
    assert so_files and all(e.xet_hash and len(e.xet_hash) == 64 for e in so_files)  # type: ignore[union-attr]  # files: lfs


def test_lock_costs_at_most_two_api_requests_per_kernel_plus_one_per_org(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2", "kernels-community/activation@v1"], targets=[CPU])
    hub.reset_counts()
    assert cli("lock", cwd=project).exit_code == 0
    api = {kind: n for kind, n in hub.requests.items() if kind not in ("resolve", "cdn", "agent-registry")}
    assert api == {"refs": 2, "tree": 2, "overview": 1}, api


def test_sync_fetches_over_plain_http_where_no_xet_server_answers(hub: TestHub, locked_project: LockedProjectFactory,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)  # hf_xet is installed and enabled
    monkeypatch.delenv("HF_HUB_DISABLE_XET")
    project = locked_project([f"{FA2}@v2"], [CPU]).path
    hub.reset_counts()
    assert cli("sync", cwd=project).exit_code == 0
    assert hub.requests["cdn"] == 1 and not [p for _, p in hub.log if "xet" in p]


# ---------------------------------------------------------------- one cache with huggingface_hub


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_kernlock_and_hf_hub_download_share_blobs_names_and_modes(
    locked_project: LockedProjectFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: int
) -> None:
    project, lock = locked_project([f"{FA2}@v2"], [CPU])
    [kernel] = lock.kernels
    variant = kernel.variant_for(CPU)
    previous = os.umask(umask)
    try:
        caches = {}
        for order in (("kernlock", "hf"), ("hf", "kernlock")):
            cache = tmp_path / "-then-".join(order)
            monkeypatch.setenv("HF_HUB_CACHE", str(cache))
            for tool in order:
                if tool == "kernlock":
                    assert cli("sync", cwd=project).exit_code == 0
                else:
                    for f in variant.files:
                        hf_hub_download(FA2, f"build/{variant.name}/{f.path}", revision=kernel.commit,
                                        repo_type="kernel", cache_dir=cache)
            blobs = cache / repo_folder(FA2) / "blobs"
            caches[order] = {p.name: p.stat().st_mode & 0o777 for p in blobs.iterdir()}
            assert not list(cache.rglob("*.incomplete"))
    finally:
        os.umask(previous)
    first, second = caches.values()
    assert first == second  # one blob per file, the same names, the same modes, whoever came first
    assert len(first) == len(variant.files)
    assert set(first.values()) == {0o666 & ~umask}
    so = next(f for f in variant.files if f.path == SO)
    assert so.sha256 in first  # LFS blobs are named by their sha256, not the CDN's ETag


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to switch to a second uid")
def test_a_second_user_reads_a_cache_root_filled(hub: TestHub, locked_project: LockedProjectFactory,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    project, lock = locked_project([f"{FA2}@v2"], [CPU])
    [kernel] = lock.kernels
    shared = Path(tempfile.mkdtemp(prefix="kernlock-shared-"))
    try:
        shared.chmod(0o755)
        monkeypatch.setenv("HF_HUB_CACHE", str(shared / "hub"))
        previous = os.umask(0o022)
        try:
            assert cli("sync", cwd=project).exit_code == 0
        finally:
            os.umask(previous)
        shutil.copy(project / "kernels.lock", shared / "kernels.lock")
        (shared / "kernels.lock").chmod(0o644)
        script = (
            "import sys; from kernlock._internal.fetch.download import ensure_variant; from kernlock._internal.lockfile.serialize import load_lockfile\n"
            "k = load_lockfile(sys.argv[1]).kernels[0]; root = ensure_variant(k, k.variant_for(sys.argv[2]), offline=True)\n"
            "print(sum(len(p.read_bytes()) for p in root.rglob('*') if p.is_file()))"
        )
        env = {**os.environ, "HOME": str(shared), "KERNLOCK_NO_CACHE": "1", "KERNLOCK_CACHE_DIR": str(shared / "kl")}
        out = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", script,
             str(shared / "kernels.lock"), CPU], capture_output=True, text=True, env=env, timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert int(out.stdout.strip()) == sum(f.size for f in kernel.variant_for(CPU).files)
    finally:
        shutil.rmtree(shared)


def test_symlinked_lock_and_pyproject_are_updated_through_the_link_keeping_modes(hub: TestHub, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    real = linked / "files"  # links within the project (one out of it is refused: test_hostile_environment)
    project = make_project(real, kernels=[f"{FA2}@v2"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    (real / "pyproject.toml").chmod(0o664)
    (real / "kernels.lock").chmod(0o640)
    for name in ("pyproject.toml", "kernels.lock"):
        (linked / name).symlink_to(f"files/{name}")
    result = cli("lock", "kernels-community/activation@v1", cwd=linked)
    assert result.exit_code == 0, result.output
    assert all((linked / name).is_symlink() for name in ("pyproject.toml", "kernels.lock"))
    assert "activation" in (real / "pyproject.toml").read_text() and "activation" in (real / "kernels.lock").read_text()
    assert (real / "pyproject.toml").stat().st_mode & 0o777 == 0o664
    assert (real / "kernels.lock").stat().st_mode & 0o777 == 0o640


def test_cache_location_follows_huggingface_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("KERNELS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SCRATCH", str(tmp_path))
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", "$SCRATCH/legacy")
    assert hub_cache_dir() == tmp_path / "legacy"
    monkeypatch.setenv("HF_HUB_CACHE", "${SCRATCH}/hub")
    assert hub_cache_dir() == tmp_path / "hub"
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", "$SCRATCH/home")
    assert hub_cache_dir() == tmp_path / "home" / "hub"


# ---------------------------------------------------------------- bounded: stalls, slow bodies, endless bodies


@pytest.mark.parametrize(("kind", "match"), [("stall", r"/resolve/"), ("stall", r"/cdn/"), ("slowloris", r"/cdn/")])
@pytest.mark.slow
def test_sync_gives_up_within_the_deadline(hub: TestHub, locked_project: LockedProjectFactory,
                                           monkeypatch: pytest.MonkeyPatch, kind: str, match: str) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU]).path
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    hub.add_fault(kind, match=match, times=100, interval=0.5)
    started = time.monotonic()
    result = cli("sync", cwd=project)
    elapsed = time.monotonic() - started
    assert hub.fired[kind] >= 1
    assert result.exit_code == 1 and elapsed < GIVE_UP_WITHIN + 2, (elapsed, result.output)
    assert FA2 in one_line(result.output)
    assert not list(hub_cache_dir().rglob("*.incomplete"))


@pytest.mark.slow
def test_cold_apply_gives_up_within_the_deadline(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU]).path
    hub.add_fault("stall", match=r"/cdn/", times=100)
    out = subprocess.run([sys.executable, "-c", LOAD_SCRIPT], cwd=project, capture_output=True, text=True,
                         env={**os.environ, **FAST}, timeout=120)
    assert hub.fired["stall"] >= 1
    given_up = time.monotonic() - hub.first_fired["stall"]  # from the first stalled request to the process's end
    assert out.returncode == 1 and given_up < GIVE_UP_WITHIN, (given_up, out.stderr)
    message = one_line(out.stderr)
    assert "cannot be downloaded" in message and "KERNLOCK_HUB_DEADLINE" in message


def test_an_endless_body_is_cut_at_the_locked_size(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU]).path
    hub.add_fault("endless", match=r"metadata\.json$", times=100, method="GET")
    result = cli("sync", cwd=project)
    assert hub.fired["endless"] >= 1
    assert result.exit_code == 1
    assert "more than the" in one_line(result.output) and "nothing was kept" in result.output
    assert hub.bytes_sent < 16 << 20
    assert not list(hub_cache_dir().rglob("*.incomplete"))


def test_an_endless_body_during_lock_is_cut_and_the_lock_kept(hub: TestHub,
                                                              locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU]).path
    before = (project / "kernels.lock").read_bytes()
    hub.add_fault("endless", match=r"/resolve/.*metadata\.json$", times=100, method="GET")
    result = cli("lock", "--upgrade", "--target", "torch2.12-cxx11-cu128-x86_64-linux", cwd=project)
    assert hub.fired["endless"] >= 1
    assert result.exit_code == 1 and "more than the" in one_line(result.output)
    assert (project / "kernels.lock").read_bytes() == before
    assert hub.bytes_sent < 16 << 20


# ---------------------------------------------------------------- rate limits


@pytest.mark.slow
def test_rate_limits_are_waited_out_with_one_line(hub: TestHub, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    hub.rate_limits, hub.rate_window = {"api": 2}, 2.0
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    urllib.request.urlopen(f"{hub.url}/api/kernels/{FA2}/refs").close()  # one of the window's two requests
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert hub.fired["429"] >= 1
    waits = [r.getMessage() for r in caplog.records if "rate limit" in r.getMessage()]
    assert waits and "'api' rate limit (2 requests per 2 s) is used up; waiting" in waits[0]
    assert all("\n" not in message for message in waits)


def test_a_rate_limit_longer_than_the_bound_fails_in_one_line(hub: TestHub, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    hub.rate_limits, hub.rate_window = {"api": 1}, 300.0
    monkeypatch.setenv("KERNLOCK_RATE_LIMIT_WAIT", "1")
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    started = time.monotonic()
    result = cli("lock", cwd=project)
    assert hub.fired["429"] >= 1 and time.monotonic() - started < 5
    line = one_line(result.output)
    assert result.exit_code == 1 and "rate limit (1 requests per 300 s) is used up for another" in line
    assert "KERNLOCK_RATE_LIMIT_WAIT" in line and not (project / "kernels.lock").exists()


@pytest.mark.parametrize("retry_after", ["-1", "soon", "nan", "1e999"])
def test_junk_retry_after_is_treated_as_absent(hub: TestHub, tmp_path: Path, retry_after: str) -> None:
    hub.add_fault("status", match="/refs", times=1, code=503, retry_after=retry_after)
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    started = time.monotonic()
    result = cli("lock", cwd=project)
    assert hub.fired["status"] == 1
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 10


# ---------------------------------------------------------------- redirects and credentials


def test_a_redirect_to_another_host_is_not_a_rename_and_credentials_are_redacted(
    hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    host, port = hub.url.removeprefix("http://").split(":")
    monkeypatch.setattr(constants, "ENDPOINT", f"http://alice:s3cret@{host}:{port}")
    elsewhere = f"http://bob:hunter2@localhost:{port}/api/kernels/{FA2}/refs?token=hf_abcdefghijklmnopqrstuvwxyz"
    hub.add_fault("respond", match="/refs", times=1, status=307, body=b"", headers={"Location": elsewhere})
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    result = cli("lock", cwd=project)
    assert hub.fired["respond"] == 1
    line = one_line(result.output)
    assert result.exit_code == 1 and "another host" in line and "rename" in line
    assert f"http://***@{host}:{port}/api/kernels/{FA2}/refs" in line and f"http://***@localhost:{port}/" in line
    assert "s3cret" not in line and "hunter2" not in line and "abcdefghijklmnop" not in line
    assert not (project / "kernels.lock").exists()


# ---------------------------------------------------------------- leftovers and repair


def test_leftovers_of_a_killed_download_are_removed(locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{FA2}@v2"], [CPU])
    [kernel] = lock.kernels
    so = next(f for f in kernel.variant_for(CPU).files if f.path == SO)
    blobs = hub_cache_dir() / repo_folder(FA2) / "blobs"
    blobs.mkdir(parents=True)
    (blobs / f"{so.sha256}.0badf00d.incomplete").write_bytes(b"half a file")
    assert cli("sync", cwd=project).exit_code == 0
    assert not list(hub_cache_dir().rglob("*.incomplete"))


def test_repair_removes_only_the_link_and_a_blob_nothing_else_points_to(locked_project: LockedProjectFactory,
                                                                        tmp_path: Path) -> None:
    project, lock = locked_project([f"{FA2}@v2"], [CPU])
    [kernel] = lock.kernels
    assert cli("sync", cwd=project).exit_code == 0
    variant = kernel.variant_for(CPU)
    root = variant_dir(kernel, variant.name)
    storage = hub_cache_dir() / repo_folder(FA2)
    files = {f.path: f for f in variant.files}
    # Another snapshot shares the metadata.json blob; the _ops.so blob is a link into a shared store.
    other = storage / "snapshots" / ("0" * 40) / "metadata.json"
    other.parent.mkdir(parents=True)
    shared_blob = (root / "metadata.json").resolve()
    other.symlink_to(os.path.relpath(shared_blob, other.parent))
    store = tmp_path / "shared-store" / "blob"
    store.parent.mkdir()
    so_blob = (root / SO).resolve()
    shutil.move(so_blob, store)
    so_blob.symlink_to(store)
    init_blob = (root / "flash_attn2/__init__.py").resolve()

    discard(kernel, variant.name, [files["metadata.json"], files[SO], files["flash_attn2/__init__.py"]], hub_cache_dir())
    assert not (root / "metadata.json").exists() and shared_blob.is_file()  # still used by the other snapshot
    assert not so_blob.is_symlink() and store.is_file()  # the shared store's file is not ours to delete
    assert not init_blob.exists()  # nothing else pointed to it
    assert cli("sync", "--repair", cwd=project).exit_code == 0
    assert all((root / f.path).is_file() for f in variant.files)
