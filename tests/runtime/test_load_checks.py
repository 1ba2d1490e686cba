"""A locked load is never weaker than plain kernels 0.18+, and stays offline.

kernels 0.18+ checks, on every load, a variant's files against the `digest` in
its metadata.json (DigestValidator, keeping receipts in its cache) and, with
sigstore installed, the signature online (SignatureValidator). Under
`kernlock.apply()` the digest is checked from the lock, kernels' own
validators step aside for the variant kernlock verified, nothing is written
into the cache and nothing goes online.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import kernels
import pytest

import kernlock
from helpers import (
    ACTIVATION,
    CPU,
    FIXTURE_CPU_BUILD,
    RELU,
    LockedProjectFactory,
    clear_loaded_kernels,
    cli,
    kernels_module,
    make_project,
    this_torchs_build,
)
from kernlock._internal.compat.kernels_api import line, module_name
from kernlock._internal.resolve import commit_lock
from kernlock._internal.runtime.apply import release
from kernlock.errors import IntegrityError
from kernlock.testing.fixtures import git, push_commit
from kernlock.testing.hub import TestHub

pytestmark = [
    pytest.mark.skipif(line().VALIDATORS is None, reason="kernels before 0.18 has no load-time validators"),
    pytest.mark.usefixtures("release_and_unload_kernels"),
]

VARIANT = this_torchs_build() or FIXTURE_CPU_BUILD  # the build kernels loads here




def _edit_after_digest(hub: TestHub) -> str:
    """Push a commit on activation's v1 whose CPU build was edited without updating its metadata digest."""
    path = f"build/{VARIANT}/activation/__init__.py"
    source = git(hub.repo_path(ACTIVATION), "show", f"refs/heads/v1:{path}")
    return push_commit(hub.repo_path(ACTIVATION), "v1", {path: source + b"\n# edited after the build\n"}, "hand edit")


def _files_under(*roots: Path) -> set[Path]:
    return {p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()}


def test_lock_refuses_a_build_whose_files_disagree_with_its_digest(hub: TestHub, tmp_path: Path) -> None:
    commit = _edit_after_digest(hub)
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"], targets=[CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code == 1, result.output
    [message] = [line for line in result.output.splitlines() if line.startswith("kernlock: error:")]
    assert f"{VARIANT}: metadata.json's digest disagrees with the files at {commit[:12]}" in message
    assert "activation/__init__.py" in message and f"kernlock lock {ACTIVATION}@<commit>" in message
    assert not (project / "kernels.lock").exists()


def test_a_locked_load_refuses_what_kernels_digest_check_refuses(
    hub: TestHub, locked_project: LockedProjectFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = _edit_after_digest(hub)
    with pytest.raises(RuntimeError, match="digest"):  # plain kernels refuses this build
        kernels.get_kernel(ACTIVATION, revision=commit)
    clear_loaded_kernels()
    # A lock written before kernlock refused such builds (its file hashes match what the Hub serves).
    monkeypatch.setattr(commit_lock, "digest_mismatches", lambda digest, files, *checked: [])
    project, lock = locked_project([f"{ACTIVATION}@v1"])
    assert lock.kernels[0].commit == commit
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(IntegrityError, match=rf"{VARIANT} at {commit[:12]}: .*activation/__init__.py.*refusing to load"):
        kernels.get_kernel(ACTIVATION, version=1)


def test_a_locked_load_writes_no_receipts_and_never_verifies_online(
    hub: TestHub, locked_project: LockedProjectFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, _ = locked_project([f"{RELU}@v1"])  # signed: kernels would verify it
    roots = [tmp_path / "hf_home", Path(os.environ.get("KERNELS_CACHE") or tmp_path / "hf_home")]
    validate = kernels_module("validate")
    calls: list[str] = []

    def online(*args: object, **kwargs: object) -> None:  # sigstore's Verifier.production() refreshes TUF online
        calls.append("online")
        raise ConnectionError("no network: TUF refresh")

    monkeypatch.setattr(validate, "has_sigstore", True)
    try:
        from sigstore.verify import Verifier

        monkeypatch.setattr(Verifier, "production", classmethod(online))
    except ImportError:  # kernels[sigstore] not installed: stand in for kernels' verify module
        monkeypatch.setitem(sys.modules, module_name("verify"),
                            SimpleNamespace(verify_signature=online, SignatureVerificationResult=None))

    kernlock.apply(project / "kernels.lock")
    assert kernels.get_kernel(RELU, version=1).relu is not None  # cold: kernlock downloads the locked files
    release()
    clear_loaded_kernels()
    kernlock.apply(project / "kernels.lock")
    before = _files_under(*roots)
    hub.reset_counts()
    assert kernels.get_kernel(RELU, version=1).relu is not None  # warm
    assert calls == [] and sum(hub.requests.values()) == 0, hub.log
    assert _files_under(*roots) == before  # no receipt, nothing else written into the cache

    release()
    clear_loaded_kernels()
    with pytest.raises(ConnectionError):  # plain kernels does verify online here (the baseline)
        kernels.get_kernel(RELU, version=1)
    assert calls == ["online"]
    monkeypatch.setattr(validate, "has_sigstore", False)
    clear_loaded_kernels()
    kernels.get_kernel(RELU, version=1)
    assert _files_under(*roots) - before, "plain kernels writes digest receipts into its cache"
