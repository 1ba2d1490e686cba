"""`kernlock verify --signatures` (offline: no socket at all, or the Hub stopped) and `--remote`.

Each cached signed variant's `metadata.json` and bundle must be the locked bytes, verify against the
pinned Sigstore root and name the signer the lock records; each tampering is one problem whose fix,
run as printed, makes `verify --signatures` pass again.
"""

from __future__ import annotations

import re
import shlex
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import CPU, CUDA_X86, RELU, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.rules.signatures import TRUSTED_ROOT_ENV
from kernlock._internal.store import hub_cache as cache
from kernlock.testing.fixtures import advance_branch, move_branch, rev_parse
from kernlock.testing.github_signer import KERNELS_COMMUNITY_BUILD
from kernlock.testing.hub import TestHub
from kernlock.testing.sigstore import TestSigstore

SIGNED = "kernels-community/signed"
CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"
MANUAL = "https://github.com/huggingface/kernels-community/.github/workflows/manual.yaml@refs/heads/main"


def synced(tmp_path: Path, extra: str = "") -> Path:
    """A project locking two signed kernels for this machine, its variants in the cache."""
    project = make_project(tmp_path / "p", [f"{SIGNED}@v1", RELU], targets=[CPU], extra=extra)
    assert cli("lock", cwd=project).exit_code == 0
    assert cli("sync", cwd=project).exit_code == 0
    return project


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it to make every socket connection fail (loopback included) until the test ends."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network use during an offline check")

    def block() -> None:
        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(socket, "create_connection", refuse)

    return block


def test_signatures_verify_with_the_hub_stopped(hub: TestHub, tmp_path: Path, no_network: Callable[[], None]) -> None:
    project = synced(tmp_path)
    hub.stop()
    no_network()
    result = cli("verify", "--signatures", cwd=project)
    assert result.exit_code == 0, result.output
    assert "ok   signatures (2 signatures verified against " in result.output


def _variant_file(project: Path, repo: str, name: str) -> Path:
    kernel = next(k for k in load_lockfile(project / "kernels.lock").kernels if k.repo == repo)
    return cache.variant_dir(kernel, CPU_VARIANT) / name


def _replace(path: Path, data: bytes) -> None:
    path.unlink()  # a link into the blob store: replace it, do not write through it
    path.write_bytes(data)


def _edit_lock(project: Path, pattern: str, replacement: Callable[[re.Match[str]], str]) -> None:
    lock = project / "kernels.lock"
    text = lock.read_text()
    edited = re.sub(pattern, replacement, text, count=1)
    assert edited != text
    lock.write_text(edited)


def _other_root(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRUSTED_ROOT_ENV, str(TestSigstore(seed="another sigstore").write_trusted_root(project / "other.json")))


TAMPERINGS: dict[str, tuple[Callable[[Path, pytest.MonkeyPatch], None], str]] = {
    "cached metadata.json": (
        lambda p, m: _replace(_variant_file(p, RELU, "metadata.json"), b'{"license": "MIT"}\n'),
        f"{RELU} {CPU_VARIANT}: metadata.json in the cache is not the locked file"),
    "cached bundle": (
        lambda p, m: _replace(_variant_file(p, RELU, "metadata.json.sigstore"),
                              _variant_file(p, SIGNED, "metadata.json.sigstore").read_bytes()),
        f"{RELU} {CPU_VARIANT}: metadata.json.sigstore in the cache is not the locked file"),
    "recorded log entry": (
        lambda p, m: _edit_lock(p, r"log-index = (\d+)", lambda g: f"log-index = {int(g[1]) + 1}"),
        f"{RELU} {CPU_VARIANT}: the bundle names {KERNELS_COMMUNITY_BUILD} (log index "),
    "recorded signer": (
        lambda p, m: _edit_lock(p, r'build-signer = "[^"]+"', lambda g: f'build-signer = "{MANUAL}"'),
        f"{RELU} {CPU_VARIANT}: signed by {MANUAL}, expected {KERNELS_COMMUNITY_BUILD}"),
    "another trust root": (
        _other_root, f"{RELU} {CPU_VARIANT}: the signature does not verify against the Sigstore trusted root"),
    "a lock from before format 1.1": (
        lambda p, m: _edit_lock(p, r"signature = \{[^}]*\}\n", lambda g: ""),
        f"{RELU} {CPU_VARIANT}: the lock records no signer for it (written before lock format 1.1)"),
}


@pytest.mark.parametrize("case", sorted(TAMPERINGS))
def test_each_tampering_fails_offline_and_its_fix_works(hub: TestHub, tmp_path: Path, case: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    project = synced(tmp_path)
    root = Path(__import__("os").environ[TRUSTED_ROOT_ENV])
    tamper, expected = TAMPERINGS[case]
    tamper(project, monkeypatch)
    with monkeypatch.context() as offline:
        offline.setattr(socket.socket, "connect", lambda *a: (_ for _ in ()).throw(OSError("offline check")))
        result = cli("verify", "--signatures", cwd=project)
    assert result.exit_code == 1, result.output
    assert "FAIL signatures: " in result.output
    problems = [line.strip() for line in result.output.splitlines() if line.startswith("     ") and "fix:" not in line]
    assert any(problem.startswith(expected) for problem in problems), problems
    fixes = [line.split("fix: ", 1)[1] for line in result.output.splitlines() if "fix: " in line]
    fix = fixes[-1]  # the recheck's, after any the policy reports
    if case == "recorded signer":  # also refused by the policy, which reports its own fix (first)
        assert "otherwise lock a revision an allowed signer signed" in fixes[0]
    if case == "another trust root":
        assert fix.startswith(f"verify against the Sigstore root the lock was made with: point [tool.kernlock] "
                              f"sigstore-trusted-root or ${TRUSTED_ROOT_ENV} at it")
        monkeypatch.setenv(TRUSTED_ROOT_ENV, str(root))
    else:
        command = shlex.split(fix)
        assert command[0] == "kernlock", fix
        assert cli(*command[1:], cwd=project).exit_code == 0
    fixed = cli("verify", "--signatures", cwd=project)
    assert fixed.exit_code == 0, fixed.output


def test_unsigned_under_require_signatures_fails_verify(hub: TestHub, tmp_path: Path) -> None:
    """A policy tightened after the lock: `verify --signatures` holds the lock to it, without any bundle to read."""
    project = make_project(tmp_path / "p", [f"{SIGNED}@unsigned"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("[tool.kernlock]\n", "[tool.kernlock]\nrequire-signatures = true\n"))
    result = cli("verify", "--signatures", cwd=project)
    assert result.exit_code == 1
    assert f"{SIGNED} {CPU_VARIANT}: unsigned (no metadata.json.sigstore), and [tool.kernlock] require-signatures" in result.output
    assert cli("verify", cwd=project).exit_code == 0  # plain verify does not check signatures


def test_remote_refetches_and_reverifies_the_bundles(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [f"{SIGNED}@v1"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    result = cli("verify", "--remote", cwd=project)
    assert result.exit_code == 0, result.output
    _edit_lock(project, r"log-index = (\d+)", lambda g: f"log-index = {int(g[1]) + 1}")
    stale = cli("verify", "--remote", cwd=project)
    assert stale.exit_code == 1
    assert f"{SIGNED}@v1: {CPU_VARIANT}: the bundle names {KERNELS_COMMUNITY_BUILD} (log index " in stale.output


def test_a_relock_that_changes_the_signer_is_reported(hub: TestHub, tmp_path: Path) -> None:
    """Like a moved branch: the change line names the signer before and after, and `lock --check` fails on it."""
    project = make_project(tmp_path / "p", [f"{SIGNED}@v1"], targets=[CPU],
                           extra=f'[tool.kernlock.signers]\n"{SIGNED}" = ["{KERNELS_COMMUNITY_BUILD}", "{MANUAL}"]\n')
    assert cli("lock", cwd=project).exit_code == 0
    old = load_lockfile(project / "kernels.lock").kernels[0].commit
    repo = hub.repo_path(SIGNED)
    moved = advance_branch(repo, "v1")  # a rebuild, re-signed by the same workflow: no signer change
    same = cli("lock", "-P", SIGNED, cwd=project)
    assert same.exit_code == 0, same.output
    assert f"  {SIGNED}@v1  {old[:12]} -> {moved[:12]}  (branch moved)" in same.output
    move_branch(repo, "v1", rev_parse(repo, "refs/heads/wrong-workflow"))
    other = rev_parse(repo, "refs/heads/v1")
    check = cli("lock", "--check", "-P", SIGNED, cwd=project)
    assert check.exit_code == 1
    assert (f"{SIGNED}@v1 {moved[:12]} -> {other[:12]} (branch moved; signer {KERNELS_COMMUNITY_BUILD} -> {MANUAL})"
            in check.output)
    relock = cli("lock", "-P", SIGNED, cwd=project)
    assert relock.exit_code == 0, relock.output
    assert f"  {SIGNED}@v1  {moved[:12]} -> {other[:12]}  (branch moved; signer {KERNELS_COMMUNITY_BUILD} -> {MANUAL})" in relock.output
    move_branch(repo, "v1", rev_parse(repo, "refs/heads/unsigned"))
    unsigned = cli("lock", "-P", SIGNED, "--json", cwd=project)  # a signature downgrade: refused (test_signatures.py)
    assert unsigned.exit_code == 1 and "unsigned (no metadata.json.sigstore), but the lock being replaced" in unsigned.output


def test_show_provenance_prints_who_signed(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [f"{SIGNED}@v1", f"{SIGNED}@unsigned"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    variant = load_lockfile(project / "kernels.lock").kernel(f"{SIGNED}@v1").variants[0]
    lines = cli("show", "--provenance", cwd=project).output.splitlines()
    [signed] = [line for line in lines if line.startswith(f"{SIGNED}@v1 {CPU_VARIANT}: ")]
    assert (f"signed by {KERNELS_COMMUNITY_BUILD} (issuer https://token.actions.githubusercontent.com, source "
            f"https://github.com/huggingface/kernels-community at 555555555555, log index {variant.signature.log_index}, "
            f"integrated 2026-01-01T00:00:") in signed
    [unsigned] = [line for line in lines if line.startswith(f"{SIGNED}@unsigned {CPU_VARIANT}: ")]
    assert "unsigned" in unsigned and "signed by" not in unsigned


def test_a_variant_missing_from_the_cache_names_the_sync_that_fetches_it(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [f"{SIGNED}@v1"], targets=[CPU, CUDA_X86])
    assert cli("lock", cwd=project).exit_code == 0
    assert cli("sync", cwd=project).exit_code == 0  # this machine's variant only
    result = cli("verify", "--signatures", "--all-targets", cwd=project)
    assert result.exit_code == 1
    fixes = [line.split("fix: ", 1)[1] for line in result.output.splitlines() if "fix: " in line]
    assert fixes and set(fixes) == {f"kernlock sync --target {CUDA_X86}"}
    assert cli(*shlex.split(fixes[0])[1:], cwd=project).exit_code == 0
    fixed = cli("verify", "--signatures", "--all-targets", cwd=project)
    assert fixed.exit_code == 0, fixed.output
    assert "2 signatures verified" in fixed.output


def test_a_relock_at_the_same_commit_restores_the_signer_the_bundle_names(hub: TestHub, tmp_path: Path) -> None:
    """A hand-edited signer is caught by `verify --signatures` and undone by `lock -P`, reported as `re-verified`."""
    project = make_project(tmp_path / "p", [f"{SIGNED}@v1"], targets=[CPU],
                           extra=f'[tool.kernlock.signers]\n"{SIGNED}" = ["{KERNELS_COMMUNITY_BUILD}", "{MANUAL}"]\n')
    assert cli("lock", cwd=project).exit_code == 0
    commit = load_lockfile(project / "kernels.lock").kernels[0].commit
    _edit_lock(project, r'build-signer = "[^"]+"', lambda g: f'build-signer = "{MANUAL}"')
    result = cli("lock", "-P", SIGNED, cwd=project)
    assert result.exit_code == 0, result.output
    assert (f"  {SIGNED}@v1  {commit[:12]} -> {commit[:12]}  (re-verified; signer {MANUAL} -> {KERNELS_COMMUNITY_BUILD})"
            in result.output)
    assert load_lockfile(project / "kernels.lock").kernels[0].variants[0].signature.build_signer == KERNELS_COMMUNITY_BUILD
