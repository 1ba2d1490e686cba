"""Offline and cluster use: sync, repair, vendor, the Hub down, many processes at once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from helpers import CPU, CUDA_X86, FA2, LockedProjectFactory, cli
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.store.hub_cache import hub_cache_dir, variant_dir
from kernlock.testing.hub import TestHub

KERNELS = [f"{FA2}@v2", "kernels-community/with-dep@v1"]

LOAD_SCRIPT = """
import json, sys
import kernlock
kernlock.apply()
import kernels
module = kernels.get_kernel("kernels-community/with-dep", version=1)
fa2 = kernels.get_kernel("kernels-community/flash-attn2", version=2)
print(json.dumps([module.KERNEL_IDENTITY, module.DEP_IDENTITY, fa2.KERNEL_IDENTITY]))
"""


def run_load(project: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", LOAD_SCRIPT], cwd=project, capture_output=True, text=True,
        env={**os.environ, **(env or {})}, timeout=120,
    )


def resolve_paths(hub: TestHub) -> list[str]:
    """The files asked about: huggingface_hub's metadata HEAD, one per file fetched."""
    return [path for method, path in hub.log if "/resolve/" in path and method == "HEAD"]


def body_gets(hub: TestHub) -> list[str]:
    """The file bodies downloaded: from `/resolve/` or, for LFS files, from the CDN it redirects to."""
    return [path for method, path in hub.log if method == "GET" and ("/resolve/" in path or path.startswith("/cdn/"))]


def file_requests_only(hub: TestHub) -> bool:
    """Besides file requests, at most huggingface_hub's own once-a-day agent-registry lookup."""
    return {p for _, p in hub.log if "/resolve/" not in p and not p.startswith("/cdn/")} <= {"/api/agent-harnesses"}


def test_sync_fetches_exactly_the_locked_variants(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project(KERNELS, [CPU, CUDA_X86]).path
    lock = load_lockfile(project / "kernels.lock")
    hub.reset_counts()
    result = cli("sync", cwd=project)
    assert result.exit_code == 0, result.output
    wanted = {
        f"/kernels/{k.repo}/resolve/{k.commit}/build/{k.variant_for(CPU).name}/{f.path}"
        for k in lock.kernels for f in k.variant_for(CPU).files
    }
    assert set(resolve_paths(hub)) == wanted
    assert len(resolve_paths(hub)) == len(wanted) == len(body_gets(hub))
    assert file_requests_only(hub)
    assert "3 variants" in result.output

    hub.reset_counts()
    result = cli("sync", "--all-targets", cwd=project)
    assert result.exit_code == 0, result.output
    assert all(f"/build/{k.variant_for(CUDA_X86).name}/" in p for p in resolve_paths(hub) for k in lock.kernels if k.repo in p)
    for kernel in lock.kernels:
        for target in (CPU, CUDA_X86):
            variant = kernel.variant_for(target)
            assert all((variant_dir(kernel, variant.name) / f.path).is_file() for f in variant.files)
    hub.reset_counts()
    assert cli("sync", "--all-targets", cwd=project).exit_code == 0
    assert sum(hub.requests.values()) == 0


def test_sync_counts_one_variant_in_the_singular(locked_project: LockedProjectFactory) -> None:
    one = cli("sync", cwd=locked_project([f"{FA2}@v2"], [CPU]).path)
    assert one.exit_code == 0 and ": 1 variant, " in one.output, one.output


def test_repair_redownloads_a_corrupted_file(locked_project: LockedProjectFactory) -> None:
    project = locked_project(KERNELS, [CPU]).path
    assert cli("sync", cwd=project).exit_code == 0
    kernel = load_lockfile(project / "kernels.lock").kernel(f"{FA2}@v2")
    variant = kernel.variant_for(CPU)
    target = (variant_dir(kernel, variant.name) / "metadata.json").resolve()
    target.write_bytes(target.read_bytes().replace(b"{", b"[", 1))
    result = cli("sync", cwd=project)
    assert result.exit_code == 1
    assert "metadata.json does not match kernels.lock" in result.output and "kernlock sync --repair" in result.output
    result = cli("sync", "--repair", cwd=project)
    assert result.exit_code == 0, result.output
    assert f"0 downloaded, 1 repaired ({target.stat().st_size} bytes fetched)" in result.output
    assert cli("sync", cwd=project).exit_code == 0


def test_a_bad_body_from_the_hub_is_never_kept(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project(KERNELS, [CPU]).path
    hub.add_fault("corrupt", match=r"/resolve/.*/metadata\.json", times=100, method="GET")
    result = cli("sync", cwd=project)
    assert result.exit_code == 1 and hub.fired["corrupt"] >= 1
    assert "the Hub sent" in result.output and "nothing was kept" in result.output
    leftovers = list(hub_cache_dir().rglob("metadata.json"))
    assert leftovers == []
    assert not list(hub_cache_dir().rglob("*.incomplete"))


def test_truncated_bodies_are_retried(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project(KERNELS, [CPU]).path
    hub.add_fault("truncate", match=r"_ops\.so", times=2, method="GET")
    result = cli("sync", cwd=project)
    assert result.exit_code == 0, result.output
    assert hub.fired["truncate"] == 2


@pytest.mark.slow
def test_vendor_directory_works_with_no_hub_and_no_cache(hub: TestHub, locked_project: LockedProjectFactory,
                                                         tmp_path: Path) -> None:
    project = locked_project(KERNELS, [CPU, CUDA_X86]).path
    vendor = tmp_path / "vendor"
    result = cli("vendor", str(vendor), cwd=project)
    assert result.exit_code == 0, result.output
    assert (vendor / "kernels.lock").read_bytes() == (project / "kernels.lock").read_bytes()
    old = (vendor / "kernels.lock").read_bytes()
    with (project / "kernels.lock").open("a") as edited:
        edited.write("# re-vendored\n")
    with (vendor / "kernels.lock").open("rb") as reader:  # a run that opened the vendored lock before the re-vendor
        assert cli("vendor", str(vendor), cwd=project).exit_code == 0
        assert reader.read() == old  # the lock was replaced, not rewritten under the reader
    assert (vendor / "kernels.lock").read_bytes() == (project / "kernels.lock").read_bytes() != old
    lock = load_lockfile(project / "kernels.lock")
    hub.stop()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = run_load(elsewhere, {
        "KERNLOCK_VENDOR_DIR": str(vendor), "HF_HOME": str(tmp_path / "empty-home"),
        "HF_ENDPOINT": "http://127.0.0.1:9",
    })
    assert out.returncode == 0, out.stderr
    with_dep, dep, fa2 = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert with_dep["commit"] == lock.kernel("kernels-community/with-dep@v1").commit
    assert dep["commit"] == lock.kernel("kernels-community/activation@v1").commit
    assert fa2["commit"] == lock.kernel(f"{FA2}@v2").commit and fa2["variant"] == "torch213-cxx11-cpu-x86_64-linux"
    assert not (tmp_path / "empty-home").exists()


@pytest.mark.slow
def test_hub_down_warm_cache_works_cold_cache_says_what_is_missing(hub: TestHub,
                                                                   locked_project: LockedProjectFactory) -> None:
    project = locked_project(KERNELS, [CPU]).path
    assert cli("sync", cwd=project).exit_code == 0
    hub.stop()
    warm = run_load(project)
    assert warm.returncode == 0, warm.stderr
    shutil.rmtree(hub_cache_dir())
    cold = run_load(project)
    assert cold.returncode != 0
    message = cold.stderr.strip().splitlines()[-1]
    assert "locked file(s)" in message and "not in the cache" in message
    assert "metadata.json" in message or "__init__.py" in message
    assert "kernlock sync" in message


@pytest.mark.slow
def test_eight_processes_cold_start_download_each_file_once(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project(KERNELS, [CPU]).path
    lock = load_lockfile(project / "kernels.lock")
    hub.reset_counts()
    procs = [
        subprocess.Popen([sys.executable, "-c", LOAD_SCRIPT], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outputs]
    identities = {out.strip().splitlines()[-1] for out, _ in outputs}
    assert len(identities) == 1
    asked, downloads = Counter(resolve_paths(hub)), Counter(body_gets(hub))
    expected_files = sum(len(k.variant_for(CPU).files) for k in lock.kernels)
    assert len(asked) == len(downloads) == expected_files
    assert max(asked.values()) == max(downloads.values()) == 1, (asked, downloads)
    assert file_requests_only(hub)


def test_sync_and_vendor_json(locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project, lock = locked_project([f"{FA2}@v2"], [CPU])
    variant = lock.kernels[0].variant_for(CPU)
    synced = cli("sync", "--json", cwd=project)
    assert synced.exit_code == 0, synced.output
    data = json.loads(synced.output)
    assert data == {
        "cache": str(hub_cache_dir()), "variants": 1, "verified": len(variant.files), "bytes": sum(f.size for f in variant.files),
        "downloaded": sorted(f"{FA2}@v2 {variant.name}/{f.path}" for f in variant.files), "repaired": [], "skipped": [], "unrooted": [],
    }
    vendored = cli("vendor", "--json", str(tmp_path / "vendor"), cwd=project)
    assert vendored.exit_code == 0, vendored.output
    assert json.loads(vendored.output) == {
        "directory": str(tmp_path / "vendor"), "variants": 1, "files": len(variant.files),
        "bytes": sum(f.size for f in variant.files), "repaired": 0,
    }
