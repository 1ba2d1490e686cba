"""Attack classes of issue 28 (round 2): each test reproduces one and checks that it is refused or fixed."""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernels
import kernlock
import kernlock._internal.runtime.importguard
from helpers import ACTIVATION, CPU, UNIVERSAL, UNTRUSTED, LockedProjectFactory, cli, make_project, run_kernlock, clear_loaded_kernels, kernels_module
from kernlock._internal.store import hub_cache as cache
from kernlock.errors import IntegrityError, LockfileError, MissingFilesError, TrustError, UnlockedKernelError, UnsafeLockfileError
from kernlock._internal.runtime.apply import VariantMismatchError, release
from kernlock.testing.fixtures import advance_branch, push_build
from kernlock.testing.hub import TestHub
from kernlock._internal.project.workspace import VENDOR_ENV
from scripts.harness import child_env, variant_of
from test_entry_points import locked  # noqa: F401 (a fixture: activation@v1 locked, its branch moved since)

CU130 = "torch2.13-cxx11-cu130-x86_64-linux"


@pytest.fixture(autouse=True)
def _release() -> None:
    yield
    release()


def test_backend_argument_binds_to_the_locked_target_or_is_refused(
    hub: TestHub, locked_project: LockedProjectFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from packaging.version import Version

    CUDA = kernels_module("backends").CUDA

    project, lock = locked_project([f"{ACTIVATION}@v1"], targets=[CPU, CU130])
    [entry] = lock.kernels
    assert advance_branch(hub.repo_path(ACTIVATION), "v1") != entry.commit
    monkeypatch.setattr(kernels_module("backends"), "_backend", lambda: CUDA(version=Version("13.0")))  # a CUDA 13.0 machine
    kernlock.apply(project / "kernels.lock", target=CU130)
    bound = (entry.commit, entry.variant_for(kernlock._internal.runtime.apply._STATE.target).name)
    for backend in (None, "cuda", "cu130"):  # kernels' family name and the variant's own spelling
        clear_loaded_kernels()
        identity = kernels.get_kernel(ACTIVATION, version=1, backend=backend).KERNEL_IDENTITY
        assert (identity["commit"], identity["variant"]) == bound, backend
    clear_loaded_kernels()
    identity = kernels.get_kernel(ACTIVATION, version=1, backend="cpu").KERNEL_IDENTITY  # the CPU target's entry
    assert (identity["commit"], identity["variant"]) == (entry.commit, variant_of(lock, entry))
    for backend in ("rocm", "cu128", "xpu"):
        with pytest.raises(VariantMismatchError, match=rf"backend={backend!r}.*locks {ACTIVATION}.*for {CU130}"):
            kernels.get_kernel(ACTIVATION, version=1, backend=backend)


def test_a_submodule_rewritten_after_the_check_is_refused_when_read(locked) -> None:
    project, _, _ = locked
    kernlock.apply(project / "kernels.lock")
    module = kernels.get_kernel(ACTIVATION, version=1)
    variant_dir = Path(module.__file__).parent
    (variant_dir / "layers.py").write_text("RAN = 'unverified'\n")  # rewritten after the load-time check
    del sys.modules[f"{module.__name__}.layers"]  # first read from now on, as a lazy import is
    with pytest.raises(IntegrityError, match=r"layers\.py changed after it was verified \(expected sha256 [0-9a-f]{64}"):
        importlib.import_module(f"{module.__name__}.layers")
    (variant_dir / "lazy.py").write_text("RAN = 'unverified'\n")  # a module added after the check
    with pytest.raises(IntegrityError, match=r"lazy\.py changed after it was verified \(kernels\.lock does not list it"):
        importlib.import_module(f"{module.__name__}.lazy")


def test_a_variant_path_swapped_before_import_is_refused(locked, tmp_path: Path, monkeypatch) -> None:
    project, _, _ = locked
    planted = tmp_path / "planted"

    def register_then_swap(kernel, variant, root: Path) -> None:
        kernlock._internal.runtime.importguard.register(kernel, variant, root)
        shutil.copytree(root, planted)  # another user's copy, whose __init__.py is theirs
        (planted / "__init__.py").write_text("KERNEL_IDENTITY = {'commit': 'planted', 'variant': 'planted'}\n")
        root.rename(root.with_name(root.name + ".verified"))
        root.symlink_to(planted, target_is_directory=True)

    monkeypatch.setattr("kernlock._internal.runtime.apply.register_verified", register_then_swap)
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(IntegrityError, match=rf"was verified as .* but now resolves to {planted}; refusing to import it"):
        kernels.get_kernel(ACTIVATION, version=1)


@pytest.mark.parametrize("gone", ["removed", "dangling link"])
def test_a_variant_path_that_no_longer_resolves_before_import_is_refused(locked, tmp_path: Path, monkeypatch,
                                                                          gone: str) -> None:
    """The re-check fails closed: a verified path that now leads nowhere is refused, never skipped."""
    project, _, _ = locked

    def register_then_remove(kernel, variant, root: Path) -> None:
        kernlock._internal.runtime.importguard.register(kernel, variant, root)
        root.rename(tmp_path / "moved-away")
        if gone == "dangling link":
            root.symlink_to(tmp_path / "nowhere", target_is_directory=True)

    monkeypatch.setattr("kernlock._internal.runtime.apply.register_verified", register_then_remove)
    kernlock.apply(project / "kernels.lock")
    expected = (MissingFilesError, r"__init__\.py is missing from .*; run `kernlock sync --repair`") if gone == "removed" \
        else (IntegrityError, rf"now resolves to {tmp_path / 'nowhere'}; refusing to import it")
    with pytest.raises(expected[0], match=expected[1]):
        kernels.get_kernel(ACTIVATION, version=1)


def test_a_directory_named_like_an_unlocked_repo_is_not_a_local_kernel(locked, tmp_path: Path, monkeypatch) -> None:
    project, _, _ = locked
    monkeypatch.chdir(tmp_path)
    (tmp_path / UNIVERSAL).mkdir(parents=True)  # a directory in the working directory named like the repo
    monkeypatch.setenv("KERNLOCK_ALLOW_LOCAL", "1")
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(UnlockedKernelError, match=rf"kernel {UNIVERSAL} \(version 1\) is not in"):
        kernels.get_kernel(UNIVERSAL, version=1)


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


@pytest.mark.parametrize("shape", ["array", "inline table"])
def test_a_deeply_nested_lock_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, shape: str) -> None:
    project = make_project(tmp_path / "p")
    deep = "[" * 100_000 if shape == "array" else "{a = " * 100_000
    (project / "kernels.lock").write_text(f"version = 1\nx = {deep}\n")
    monkeypatch.chdir(project)
    for command, code in ((["verify"], 2), (["lock", "--migrate"], 2), (["run", "--", "true"], 2)):  # a bad lock: 2
        result = cli(*command, cwd=project)
        assert result.exit_code == code and "nested too deeply to read" in result.output, (command, result.output)
        lines = 3 if command == ["verify"] else 1  # verify's report: the check, the problem, its fix
        assert len(result.output.strip().splitlines()) == lines, result.output
    with pytest.raises(LockfileError, match=r"kernels\.lock: not valid TOML \(nested too deeply to read\)"):
        kernlock.apply()


def test_export_into_a_fifo_a_pipe_or_a_missing_directory_never_hangs(locked, tmp_path: Path) -> None:
    project, _, entry = locked
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    nobody = run_kernlock("export", "-o", str(fifo), cwd=project, timeout=30)  # no reader: refused at once
    assert nobody.returncode == 2 and "no process is reading it; start the reader first" in nobody.stderr
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    try:
        assert run_kernlock("export", "-o", str(fifo), cwd=project, timeout=60).returncode == 0
        assert entry.commit in reader.communicate(timeout=60)[0]
    finally:
        reader.kill()
    piped = subprocess.run(f"{sys.executable} -m kernlock export -o /dev/stdout | cat", shell=True, cwd=project,
                           capture_output=True, text=True, timeout=60, env=child_env())
    assert piped.returncode == 0 and entry.commit in piped.stdout, piped.stderr
    missing = cli("export", "-o", str(tmp_path / "no" / "such" / "kernels.lock.json"), cwd=project)
    assert missing.exit_code == 2 and f"{tmp_path}/no/such is not a directory; nothing was written; create it" in missing.output


def test_a_locked_file_with_a_long_relative_path_syncs_and_applies(hub: TestHub, locked_project: LockedProjectFactory,
                                                                  tmp_path: Path, monkeypatch) -> None:
    long_name = "data/" + "d" * 140 + "/" + "f" * 60 + ".txt"  # 206 characters under the variant
    push_build(hub.repo_path(UNIVERSAL), "v1", {f"build/torch-universal/{long_name}": b"payload\n"}, "a long path")
    project, lock = locked_project([f"{UNIVERSAL}@v1"])
    assert any(f.path == long_name for f in lock.kernels[0].variant_for(lock.targets[0]).files)
    synced = cli("sync", cwd=project)
    assert synced.exit_code == 0, synced.output
    monkeypatch.setenv("HF_HOME", str(tmp_path / "cold"))  # a cold apply() downloads it too
    kernlock.apply(project / "kernels.lock")
    assert kernels.get_kernel(UNIVERSAL, version=1) is not None


def _in_private_mount(script: str, mount: Path, options: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `script` (sh) in a private mount namespace where `mount` is a small tmpfs mounted with `options`."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a private tmpfs")
    mount.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m is not allowed here ({probe.stderr.decode().strip()})")
    return subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o {options} tmpfs {mount} && {script}"],
                          capture_output=True, text=True, timeout=timeout, env=child_env())


def test_a_full_disk_while_writing_the_lock_is_one_line_and_the_lock_stays(hub: TestHub, tmp_path: Path) -> None:
    source = make_project(tmp_path / "source", kernels=[f"{ACTIVATION}@v1"])
    assert cli("lock", cwd=source).exit_code == 0
    before = (source / "kernels.lock").read_bytes()
    (source / "pyproject.toml").write_text((source / "pyproject.toml").read_text().replace('@v1"', f'@v1", "{UNIVERSAL}@v1"'))
    disk = tmp_path / "disk"
    done = _in_private_mount(
        f"cp -a {source}/. {disk}/ && (dd if=/dev/zero of={disk}/filler bs=4k 2>/dev/null || true) && cd {disk} && "
        f"{sys.executable} -m kernlock lock; echo rc=$?; cmp kernels.lock {source}/kernels.lock && echo intact",
        disk, "size=1m")
    assert "rc=1" in done.stdout and "intact" in done.stdout and (source / "kernels.lock").read_bytes() == before
    [line] = done.stderr.strip().splitlines()
    assert f"cannot write {disk}/kernels.lock (No space left on device); it is unchanged; free space" in line


@pytest.mark.parametrize("disk", ["full", "read-only"])
def test_a_full_or_read_only_cache_does_not_blame_the_network(locked, tmp_path: Path, disk: str) -> None:
    project, _, _ = locked
    home = tmp_path / "hf_home_mount"
    fill = f"(dd if=/dev/zero of={home}/filler bs=4k 2>/dev/null || true) && " if disk == "full" else ""
    done = _in_private_mount(f"{fill}cd {project} && HF_HOME={home} {sys.executable} -m kernlock sync", home,
                             "size=1m" if disk == "full" else "ro,size=1m")
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "network" not in line and "HF_ENDPOINT" not in line, line
    expected = "is full (No space left on device); free space" if disk == "full" else "is not writable (Read-only file system"
    assert expected in line, line


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
        assert f"refusing {shared} as the project ({marker}): it is owned by uid 65534, not by you (uid 0); make {checkout} " \
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


CPU_VARIANT = "build/torch213-cxx11-cpu-x86_64-linux"


def _listing(count: int, size: int = 10) -> list[dict]:
    return [{"type": "file", "path": f"{CPU_VARIANT}/m{i}.py", "oid": "a" * 40, "size": size} for i in range(count)]


@pytest.mark.parametrize(
    ("listing", "headers", "problem"),
    [
        (_listing(1), "loop", "links back to a page it already sent"),
        (_listing(20_001), None, "has more than 20000 entries, more than kernlock accepts"),
        (_listing(1, size=1 << 30), None, "as a 1073741824-byte file stored in git (not LFS); kernlock reads at most"),
    ],
    ids=["self-linked pages", "100k entries", "huge git file"],
)
def test_hostile_listings_are_bounded(hub: TestHub, tmp_path: Path, listing, headers, problem: str) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"], targets=[CPU])
    loop = f"{hub.url}/api/kernels/{ACTIVATION}/tree/loop"
    hub.add_fault("respond", match="/tree/", times=200, body=listing,
                  headers={"Link": f'<{loop}>; rel="next"'} if headers == "loop" else {})
    result = cli("lock", cwd=project)
    assert result.exit_code == 1 and problem in result.output, result.output
    assert hub.fired["respond"] <= 2 and not any("/resolve/" in path for _, path in hub.log)


@pytest.mark.parametrize("match", [r"/refs$", r"/tree/"])
def test_header_slow_drip_is_bounded_by_the_hub_deadline(hub: TestHub, tmp_path: Path, monkeypatch, match: str) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"], targets=[CPU])
    for name, value in {"HF_HUB_ETAG_TIMEOUT": "1", "KERNLOCK_HUB_DEADLINE": "3"}.items():
        monkeypatch.setenv(name, value)
    # a byte every 0.3 s, so no read timeout trips; for 15 s, so the old code fails instead of hanging
    hub.add_fault("drip-headers", match=match, times=3, interval=0.3, seconds=15)
    started = time.monotonic()
    result = cli("lock", cwd=project)
    elapsed = time.monotonic() - started
    assert hub.fired["drip-headers"] >= 1
    assert result.exit_code == 1 and elapsed < 3 + 6, (elapsed, result.output)  # the deadline, slack for a loaded machine
    assert "KERNLOCK_HUB_DEADLINE" in result.output and len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("reader", ["sync", "cold apply()"])
def test_header_slow_drip_on_a_download_is_bounded_by_the_hub_deadline(
    hub: TestHub, locked_project: LockedProjectFactory, monkeypatch, reader: str
) -> None:
    """`sync` and `apply()` with a cold cache both download the locked files; the deadline bounds either."""
    project, _ = locked_project([f"{ACTIVATION}@v1"], targets=[CPU])
    monkeypatch.setenv("KERNLOCK_HUB_DEADLINE", "3")
    hub.add_fault("drip-headers", match=r"/resolve/", times=3, interval=0.3, seconds=15)
    started = time.monotonic()
    if reader == "sync":
        result = cli("sync", cwd=project)
        code, output, slack = result.exit_code, result.output, 6
    else:
        load = f"import kernels, kernlock\nkernlock.apply()\nkernels.get_kernel({ACTIVATION!r}, version=1)\n"
        out = subprocess.run([sys.executable, "-c", load], cwd=project, capture_output=True, text=True,
                             env=child_env(), timeout=120)
        code, output, slack = out.returncode, out.stderr, 10  # a process start on top
    elapsed = time.monotonic() - started
    assert hub.fired["drip-headers"] >= 1
    assert code == 1 and elapsed < 3 + slack, (elapsed, output[-3000:])
    assert "KERNLOCK_HUB_DEADLINE" in output, output[-3000:]
    if reader != "sync":
        assert "cannot be downloaded" in output, output[-3000:]


def test_an_extension_module_planted_after_the_check_never_runs(locked, tmp_path: Path) -> None:
    """A lazily imported submodule replaced by an unlisted extension module: refused before dlopen runs its code."""
    import shutil
    import subprocess
    import sysconfig

    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the planted extension")
    marker = tmp_path / "constructor-ran"
    source = tmp_path / "planted.c"
    source.write_text(f'#include <stdio.h>\n__attribute__((constructor)) static void ran(void) '
                      f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    project, _, _ = locked
    kernlock.apply(project / "kernels.lock")
    module = kernels.get_kernel(ACTIVATION, version=1)
    variant_dir = Path(module.__file__).parent
    planted = variant_dir / f"lazyext{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(planted), str(source)], check=True)
    with pytest.raises(IntegrityError, match=r"lazyext\..*\.so changed after it was verified \(kernels\.lock does not list it"):
        importlib.import_module(f"{module.__name__}.lazyext")
    assert not marker.exists()  # its constructor never ran


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
