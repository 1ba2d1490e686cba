"""GC roots in the shared Hub cache and `kernlock cache` (issue 47 items 1-2).

`sync`, `vendor` and `apply()`'s own downloads leave `refs/kernlock/<lock id>/<commit>` in the repo's
cache folder, so huggingface_hub 2.4's real `hf cache prune -y` keeps the locked commits; `kernlock
cache prune` frees what no registered lock names any more. `apply()` runs in fresh interpreters, as a
training script does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import (
    CPU,
    FA2,
    REPO_ROOT,
    LockedProjectFactory,
    cli,
    make_project,
    markdown_blocks,
    run_bash,
    run_kernlock,
)
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.store.gc_roots import lock_id
from kernlock._internal.store.hub_cache import hub_cache_dir, repo_folder
from kernlock.testing.hub import TestHub

HF = str(Path(sys.executable).parent / "hf")  # huggingface_hub's own CLI, of the installed 2.4

LOAD = """
import json, kernlock
kernlock.apply()
import kernels
module = kernels.get_kernel("kernels-community/flash-attn2", version=VERSION)
print("IDENTITY " + json.dumps(module.KERNEL_IDENTITY))
"""


def hf(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([HF, *args], capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def load(project: Path, version: int, **env: str) -> dict:
    """`apply()` then kernels' own `get_kernel(version=…)` in a fresh interpreter; the loaded module's identity."""
    done = subprocess.run([sys.executable, "-c", LOAD.replace("VERSION", str(version))], cwd=project,
                          capture_output=True, text=True, timeout=180, env={**os.environ, **env})
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("IDENTITY ")]
    return json.loads(line[len("IDENTITY "):])


def snapshot(commit: str) -> Path:
    return hub_cache_dir() / repo_folder(FA2) / "snapshots" / commit


def root(project: Path, commit: str) -> Path:
    return hub_cache_dir() / repo_folder(FA2) / "refs" / "kernlock" / lock_id(project / "kernels.lock") / commit


def survives_hf_cache_prune(project: Path, commit: str, hub: TestHub) -> None:
    """The real `hf cache prune -y` keeps the commit; then, offline, `verify --cache` passes and `apply()` loads it."""
    assert root(project, commit).read_text() == commit  # the whole file is the sha: what huggingface_hub reads
    pruned = hf("cache", "prune", "-y")
    assert FA2 not in pruned.stdout, pruned.stdout
    assert snapshot(commit).is_dir()
    hub.reset_counts()
    verified = run_kernlock("verify", "--cache", cwd=project, env={"HF_HUB_OFFLINE": "1"})
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert load(project, 4, HF_HUB_OFFLINE="1")["commit"] == commit
    assert sum(hub.requests.values()) == 0, hub.log


@pytest.mark.slow
def test_synced_commits_survive_hf_cache_prune(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{FA2}@v4"], [CPU])
    [entry] = lock.kernels
    synced = cli("sync", cwd=project)
    assert synced.exit_code == 0, synced.output

    # the control: without its root, the synced commit is a detached revision that `hf cache prune` deletes
    shutil.move(root(project, entry.commit), hub_cache_dir() / "moved-root")
    assert f"{FA2} (entire repo)" in hf("cache", "prune", "--dry-run").stdout
    shutil.move(hub_cache_dir() / "moved-root", root(project, entry.commit))

    assert f"kernlock/{lock_id(project / 'kernels.lock')}/{entry.commit}" in hf("cache", "ls", "--revisions", "--no-truncate").stdout
    survives_hf_cache_prune(project, entry.commit, hub)


@pytest.mark.slow
def test_apply_s_own_first_download_roots_the_commit(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{FA2}@v4"], [CPU])
    [entry] = lock.kernels
    assert not snapshot(entry.commit).exists()
    assert load(project, 4)["commit"] == entry.commit  # online: apply()'s loader downloads the variant
    survives_hf_cache_prune(project, entry.commit, hub)


def relock(project: Path, spec: str) -> str:
    make_project(project, [spec], [CPU])
    locked = cli("lock", cwd=project)
    assert locked.exit_code == 0, locked.output
    synced = cli("sync", cwd=project)
    assert synced.exit_code == 0, synced.output
    [entry] = load_lockfile(project / "kernels.lock").kernels
    return entry.commit


def blobs(commit: str) -> set[Path]:
    return {p.resolve() for p in snapshot(commit).rglob("*") if p.is_file()}


def test_cache_prune_frees_the_commit_no_registered_lock_names(hub: TestHub, tmp_path: Path) -> None:
    project = tmp_path / "p"
    v4 = relock(project, f"{FA2}@v4")
    v2 = relock(project, f"{FA2}@v2")
    assert v4 != v2 and snapshot(v4).is_dir() and snapshot(v2).is_dir()
    kept_blobs = blobs(v2)
    assert blobs(v4) & kept_blobs  # a file both commits hold (same bytes): one blob, which must stay

    listed = json.loads(cli("cache", "list", "--json").output)
    [mine] = listed["locks"]
    assert mine["lock"] == str((project / "kernels.lock").resolve()) and mine["live"]
    assert [(c["commit"], c["cached"], c["rooted"]) for c in mine["commits"]] == [(v2, True, True)]
    assert mine["size"] == sum(p.stat().st_size for p in kept_blobs) > 0

    dry = cli("cache", "prune", "--dry-run", cwd=project)
    assert dry.exit_code == 0 and f"would free {FA2}@{v4[:12]}" in dry.output, dry.output
    assert snapshot(v4).is_dir() and root(project, v4).is_file()

    pruned = cli("cache", "prune", cwd=project)
    assert pruned.exit_code == 0, pruned.output
    assert f"freed {FA2}@{v4[:12]}" in pruned.output and "freed 1 commit(s)" in pruned.output
    assert not snapshot(v4).exists() and not root(project, v4).exists()
    assert blobs(v2) == kept_blobs and all(p.is_file() for p in kept_blobs)
    assert cli("verify", "--cache", cwd=project).exit_code == 0
    assert "freed 0 commit(s)" in cli("cache", "prune", cwd=project).output
    listed = hf("cache", "ls", "--revisions", "--no-truncate", "--show-warnings")
    assert listed.stdout.count(FA2) == 1 and "orrupt" not in listed.stdout + listed.stderr  # v2's row only


def test_a_second_project_still_locking_v4_keeps_it_until_it_is_gone(hub: TestHub, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    v4 = relock(first, f"{FA2}@v4")
    assert relock(second, f"{FA2}@v4") == v4
    v2 = relock(first, f"{FA2}@v2")

    pruned = cli("cache", "prune", cwd=first)
    assert pruned.exit_code == 0 and "freed 0 commit(s)" in pruned.output, pruned.output
    assert "1 stale root(s) removed" in pruned.output  # the first project's root of v4
    assert snapshot(v4).is_dir() and root(second, v4).is_file() and not root(first, v4).exists()
    assert cli("verify", "--cache", cwd=second).exit_code == 0
    assert cli("verify", "--cache", cwd=first).exit_code == 0

    shutil.rmtree(second)  # the project vanishes: its registration expires, and v4 goes
    listed = json.loads(cli("cache", "list", "--json").output)
    assert {lk["lock"]: lk["live"] for lk in listed["locks"]} == {
        str((first / "kernels.lock").resolve()): True, str((second / "kernels.lock").resolve()): False}
    pruned = cli("cache", "prune", cwd=first)
    assert f"freed {FA2}@{v4[:12]}" in pruned.output, pruned.output
    assert f"the registration of {(second / 'kernels.lock').resolve()} has expired" in pruned.output
    assert not snapshot(v4).exists() and snapshot(v2).is_dir()
    assert [lk["lock"] for lk in json.loads(cli("cache", "list", "--json").output)["locks"]] == [
        str((first / "kernels.lock").resolve())]
    assert cli("verify", "--cache", cwd=first).exit_code == 0


def test_a_lock_registers_when_written_and_vendor_roots_what_it_syncs(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [f"{FA2}@v4"], [CPU])
    assert cli("lock", cwd=project).exit_code == 0
    [entry] = load_lockfile(project / "kernels.lock").kernels
    [mine] = json.loads(cli("cache", "list", "--json").output)["locks"]
    assert mine["commits"] == [{"repo": FA2, "commit": entry.commit, "specs": [f"{FA2}@v4"], "cached": False,
                                "rooted": False, "size": 0}]
    vendored = cli("vendor", str(tmp_path / "vendor"), cwd=project)
    assert vendored.exit_code == 0, vendored.output
    assert root(project, entry.commit).read_text() == entry.commit
    listed = cli("cache", "list", cwd=project).output
    assert f"{FA2}@v4 {entry.commit[:12]}: cached, rooted" in listed, listed
    assert cli("cache", "dir").output.strip() == str(hub_cache_dir())


def test_prune_keeps_what_another_ref_names_and_drops_a_dangling_root(hub: TestHub, tmp_path: Path) -> None:
    project = tmp_path / "p"
    v4 = relock(project, f"{FA2}@v4")
    relock(project, f"{FA2}@v2")
    refs = hub_cache_dir() / repo_folder(FA2) / "refs"
    (refs / "v4").write_text(v4)  # what kernels' own online `get_kernel(version=4)` records
    foreign = refs / "kernlock" / "0123456789abcdef" / v4  # a lock registered elsewhere (another user's)
    foreign.parent.mkdir()
    foreign.write_text(v4)
    dangling = refs / "kernlock" / lock_id(project / "kernels.lock") / ("d" * 40)  # its snapshot was deleted by hand
    dangling.write_text("d" * 40)

    assert "1 root(s) of locks not registered here are kept" in cli("cache", "list").output
    pruned = cli("cache", "prune", cwd=project)
    assert pruned.exit_code == 0, pruned.output
    assert f"kept {FA2}@{v4[:12]} (another ref names it)" in pruned.output, pruned.output
    assert "2 stale root(s) removed" in pruned.output  # this lock's root of v4, and the dangling one
    assert snapshot(v4).is_dir() and foreign.is_file() and (refs / "v4").read_text() == v4
    assert not root(project, v4).exists() and not dangling.exists()


def test_cache_commands_need_the_private_directory_and_say_so(hub: TestHub, tmp_path: Path) -> None:
    off = run_kernlock("cache", "prune", cwd=tmp_path, env={"KERNLOCK_NO_CACHE": "1"})
    assert off.returncode == 2
    [line] = off.stderr.splitlines()
    assert line.startswith("kernlock: error: kernlock's private directory is off") and "unset KERNLOCK_NO_CACHE" in line
    fixed = run_kernlock("cache", "prune", cwd=tmp_path)  # the fix: KERNLOCK_NO_CACHE unset
    assert fixed.returncode == 0 and "freed 0 commit(s)" in fixed.stdout, fixed.stdout + fixed.stderr


def test_a_root_sync_cannot_write_is_one_warning_and_the_files_still_verify(locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{FA2}@v4"], [CPU])
    assert cli("sync", cwd=project).exit_code == 0
    [entry] = lock.kernels
    shutil.rmtree(hub_cache_dir() / repo_folder(FA2) / "refs" / "kernlock")
    (hub_cache_dir() / repo_folder(FA2) / "refs" / "kernlock").write_text("in the way")  # no directory can go there
    synced = run_kernlock("sync", "--json", cwd=project)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    [line] = json.loads(synced.stdout)["unrooted"]
    assert line.startswith(f"{FA2}@{entry.commit[:12]}: no GC root written in {hub_cache_dir()}"), line
    warned = run_kernlock("sync", cwd=project)
    assert warned.returncode == 0 and f"kernlock: warning: {line}" in warned.stderr, warned.stderr


def test_the_clusters_shared_cache_block_runs_as_written(hub: TestHub, tmp_path: Path) -> None:
    """docs/how-to/clusters.md's shared-cache block, verbatim, on a project whose lock moved from v4 to v2."""
    project = tmp_path / "p"
    v4 = relock(project, f"{FA2}@v4")
    make_project(project, [f"{FA2}@v2"], [CPU])
    assert cli("lock", cwd=project).exit_code == 0
    page = (REPO_ROOT / "docs" / "how-to" / "clusters.md").read_text(encoding="utf-8")
    [block] = [b for b in markdown_blocks(page, "bash") if "hf cache prune" in b]
    done = run_bash(block, project)
    assert done.returncode == 0, done.stdout + done.stderr
    [v2] = [k.commit for k in load_lockfile(project / "kernels.lock").kernels]
    assert f"would free {FA2}@{v4[:12]}" in done.stdout and f"freed {FA2}@{v4[:12]}" in done.stdout, done.stdout
    assert not snapshot(v4).exists() and root(project, v2).read_text() == v2


def test_prune_never_deletes_through_a_link_planted_in_a_snapshot(hub: TestHub, tmp_path: Path) -> None:
    """huggingface_hub's deletion removes a freed revision's blobs: a link another user of the shared cache planted
    in the snapshot would make it delete the link's target, so the revision is kept, with the `rm` to run."""
    project = tmp_path / "p"
    v4 = relock(project, f"{FA2}@v4")
    relock(project, f"{FA2}@v2")
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's file")
    planted = snapshot(v4) / "build" / "planted.py"
    planted.symlink_to(victim)

    refused = cli("cache", "prune", cwd=project)
    assert refused.exit_code == 0 and "freed 0 commit(s)" in refused.output, refused.output
    [warning] = [line for line in refused.output.splitlines() if line.startswith("kernlock: warning:")]
    assert f"{FA2}@{v4[:12]}: not freed ({planted} is a link out of the repo's blobs" in warning
    assert victim.read_text() == "someone's file" and snapshot(v4).is_dir()
    fix = warning.rsplit("`", 2)[1]
    assert fix == f"rm -- {planted}"
    assert subprocess.run(fix, shell=True, check=False).returncode == 0
    freed = cli("cache", "prune", cwd=project)
    assert f"freed {FA2}@{v4[:12]}" in freed.output, freed.output
    assert victim.read_text() == "someone's file" and not snapshot(v4).exists()


PLAIN = """
import json, kernels
module = kernels.get_kernel("kernels-community/flash-attn2", version=4)
print("IDENTITY " + json.dumps(module.KERNEL_IDENTITY))
"""


@pytest.mark.slow
def test_kernels_own_offline_version_lookup_still_resolves_beside_the_roots(hub: TestHub,
                                                                           locked_project: LockedProjectFactory) -> None:
    """Plain kernels (no kernlock) records `refs/v4` online and reads only top-level `refs/v<N>` offline: the nested
    `refs/kernlock/` beside it changes nothing, before or after `hf cache prune -y`."""
    project, lock = locked_project([f"{FA2}@v4"], [CPU])
    [entry] = lock.kernels

    def plain(**env: str) -> dict:
        done = subprocess.run([sys.executable, "-c", PLAIN], cwd=project, capture_output=True, text=True, timeout=180,
                              env={**os.environ, **env})
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout.split("IDENTITY ", 1)[1])

    assert plain()["commit"] == entry.commit  # online: kernels downloads and records refs/v4
    assert (hub_cache_dir() / repo_folder(FA2) / "refs" / "v4").read_text() == entry.commit
    assert cli("sync", cwd=project).exit_code == 0
    assert root(project, entry.commit).is_file()
    hf("cache", "prune", "-y")
    assert plain(HF_HUB_OFFLINE="1")["commit"] == entry.commit
