"""Which lock is the authority: the project's over a vendor directory's, never one another user planted or can write,
never a project started where every user can write (issue 28)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest

import kernlock
import kernlock._internal.runtime.importguard
from helpers import ACTIVATION, UNTRUSTED, LockedProjectFactory, cli, make_project, run_kernlock
from kernlock._internal.project.workspace import VENDOR_ENV
from kernlock._internal.store import hub_cache as cache
from kernlock.errors import LockfileError, TrustError, UnsafeLockfileError
from kernlock.testing.hub import TestHub
from scripts.harness import child_env

pytestmark = pytest.mark.usefixtures("release_applied_lock")


def _tampered_vendor_dir(project: Path, lock, tmp_path: Path) -> Path:
    """A vendor directory whose `__init__.py` and its hash in the vendor dir's own lock were both rewritten."""
    [entry] = lock.kernels
    vendor = tmp_path / "vendor"
    assert cli("vendor", str(vendor), cwd=project).exit_code == 0
    variant = entry.variant_for(lock.targets[0])
    [init] = [f for f in variant.files if f.path.endswith("/__init__.py")]
    planted = b"KERNEL_IDENTITY = {'commit': 'planted', 'variant': 'planted'}\n"
    (cache.vendored_variant_dir(entry, variant.name, vendor) / init.path).write_bytes(planted)
    vendor_lock = vendor / "kernels.lock"
    text = vendor_lock.read_text().replace(init.sha256, hashlib.sha256(planted).hexdigest())
    vendor_lock.write_text(text.replace(f"size = {init.size}\n", f"size = {len(planted)}\n"))
    return vendor


def test_the_projects_lock_wins_over_a_vendor_dirs_own_lock(locked, tmp_path: Path, monkeypatch) -> None:
    project, lock, _ = locked
    vendor = _tampered_vendor_dir(project, lock, tmp_path)
    monkeypatch.setenv(VENDOR_ENV, str(vendor))
    monkeypatch.chdir(project)
    both = rf"vendor directory's {vendor}/kernels.lock disagrees with the project's {project}/kernels.lock on {ACTIVATION}@v1"
    with pytest.raises(LockfileError, match=both + ".*the project's lock wins; fix: re-export"):
        kernlock.apply()
    verified = cli("verify", cwd=project)
    assert verified.exit_code == 2 and "disagrees with the project's" in verified.output


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the vendor lock to another user")
def test_a_vendor_lock_owned_by_another_user_is_refused_without_a_project_lock(locked, tmp_path: Path,
                                                                              monkeypatch) -> None:
    project, lock, _ = locked
    vendor = _tampered_vendor_dir(project, lock, tmp_path)
    os.chown(vendor / "kernels.lock", 65534, 65534)
    monkeypatch.setenv(VENDOR_ENV, str(vendor))
    elsewhere = tmp_path / "job"
    elsewhere.mkdir()
    (elsewhere / ".git").mkdir()  # a project of its own, without a lock
    monkeypatch.chdir(elsewhere)
    with pytest.raises(UnsafeLockfileError, match=rf"refusing {vendor}/kernels.lock: it is owned by uid 65534"):
        kernlock.apply()


def test_an_allowlisted_entry_the_project_no_longer_trusts_fails_verify_and_apply(
    locked_project: LockedProjectFactory, monkeypatch
) -> None:
    project, lock = locked_project([f"{UNTRUSTED}@v1"], extra=f'trust = ["{UNTRUSTED}"]\n')
    assert lock.kernels[0].trust == "allowlist"
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'trust = ["{UNTRUSTED}"]', "trust = []"))
    problem = f'{UNTRUSTED}@v1 is locked as trust = "allowlist" but {pyproject} [tool.kernlock] trust does not list {UNTRUSTED}'
    for args in (["verify"], ["verify", "--remote"]):
        result = cli(*args, cwd=project)
        assert result.exit_code == 1 and problem in result.output, (args, result.output)
    monkeypatch.chdir(project)
    with pytest.raises(TrustError, match=re.escape(problem) + f".*add '{UNTRUSTED}' to \\[tool.kernlock\\] trust"):
        kernlock.apply()


def test_a_configured_lockfile_through_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    other = make_project(tmp_path / "other", kernels=[f"{ACTIVATION}@v1"])
    (other / "kernels.lock").write_text("# another project's lock\n")
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"], extra='lockfile = "shared/kernels.lock"\n')
    (project / "shared").symlink_to(other, target_is_directory=True)
    result = cli("lock", cwd=project)
    assert result.exit_code == 2 and "lockfile = 'shared/kernels.lock' lies outside the project" in result.output
    assert (other / "kernels.lock").read_text() == "# another project's lock\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant a file as another user")
@pytest.mark.parametrize("planted", ["pyproject.toml", ".git"])
def test_a_project_marker_planted_by_another_user_above_a_checkout_is_refused(tmp_path: Path, planted: str) -> None:
    shared = tmp_path / "shared"  # e.g. /tmp: the checkout below has no marker of its own
    checkout = shared / "victim" / "src"
    checkout.mkdir(parents=True)
    marker = shared / planted
    if planted == ".git":
        marker.mkdir()
    else:
        make_project(shared, kernels=[f"{UNTRUSTED}@v1"], extra=f'trust = ["{UNTRUSTED}"]\n')
    os.chown(marker, 65534, 65534)
    for args in (["lock"], ["verify"]):
        result = cli(*args, cwd=checkout)
        assert result.exit_code == 2, result.output
        assert f"refusing {shared} as the project ({marker}): it is owned by uid 65534, not by you (uid 0); fix: make {checkout} " \
               "a project of its own" in result.output
    (checkout / ".git").mkdir()  # the fix it names
    assert "refusing" not in cli("verify", cwd=checkout).output


@pytest.mark.parametrize("sticky", [True, False], ids=["sticky like /tmp", "not sticky"])
def test_no_project_is_started_in_a_directory_every_user_can_write(hub: TestHub, tmp_path: Path, sticky: bool) -> None:
    """`kernlock lock SPEC` in /tmp would write the pyproject.toml every markerless checkout below adopts: refused,
    nothing written, and the fix it prints works as printed; an existing project there is still locked."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777 if sticky else 0o777)
    spec = f"{ACTIVATION}@v1"
    refused = run_kernlock("lock", spec, cwd=shared)
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout + refused.stderr
    [line] = refused.stderr.splitlines()
    assert line.startswith(f"kernlock: error: refusing to start a project in {shared}: every user can write to it"), line
    assert list(shared.iterdir()) == []
    fix = re.search(r"\((mkdir my-project && cd my-project)\)$", line)
    assert fix is not None, line
    done = subprocess.run(["bash", "-ec", f"{fix[1]} && kernlock lock {spec}"], cwd=shared, env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and (shared / "my-project" / "kernels.lock").is_file(), done.stderr
    make_project(shared, kernels=[spec])  # a project someone set up there on purpose: its own business
    assert run_kernlock("lock", cwd=shared).returncode == 0 and (shared / "kernels.lock").is_file()


def test_a_vendor_lock_others_can_write_is_not_the_authority(locked, tmp_path: Path, monkeypatch) -> None:
    """In a group-shared vendor directory (umask 002) another member could rewrite the lock in place, hashes and
    all, keeping its owner: without a project lock it is refused; the project's own lock still works with it."""
    project, lock, _ = locked
    vendor = tmp_path / "vendor"
    assert cli("vendor", str(vendor), cwd=project).exit_code == 0
    (vendor / "kernels.lock").chmod(0o664)
    monkeypatch.setenv(VENDOR_ENV, str(vendor))
    elsewhere = tmp_path / "job"
    elsewhere.mkdir()
    (elsewhere / ".git").mkdir()  # a project of its own, without a lock: the vendor lock would be the authority
    monkeypatch.chdir(elsewhere)
    with pytest.raises(UnsafeLockfileError, match=rf"refusing {vendor}/kernels.lock: {vendor}/kernels.lock is "
                                                  "writable by its group") as refused:
        kernlock.apply()
    ran = cli("run", "--vendor", str(vendor), "--", "true", cwd=elsewhere)
    assert ran.exit_code != 0 and "writable by its group" in ran.output
    fix = refused.value.fix or ""
    subprocess.run(fix.split("`")[1], shell=True, check=True)  # the printed chmod
    kernlock.apply()  # now only its owner can write it
    monkeypatch.chdir(project)  # the project's own lock is the authority, whatever the vendor lock's mode
    (vendor / "kernels.lock").chmod(0o664)
    kernlock.apply()
