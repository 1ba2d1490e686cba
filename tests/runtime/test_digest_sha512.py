"""SHA-512 metadata digests (kernels' `DigestAlgorithm.SHA512`, base64 per file) are checked, not refused.

`lock` checks what it reads (every small file); `verify --cache` and `apply()` check every file where it lies.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import CPU, cli, make_project
from kernlock._internal.compat.kernels_api import variant_metadata
from kernlock._internal.lockfile.entries import LockedFile
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.store.metadata import cached_digest_problem, digest_problem
from kernlock.testing.hub import TestHub
from scripts.harness import load_identities, python

SHA512 = "kernels-community/sha512"


def _locked(project: Path, spec: str) -> None:
    make_project(project, kernels=[spec], targets=[CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output


def _verify_cache(project: Path) -> dict:
    result = cli("verify", "--cache", "--json", cwd=project)
    report = json.loads(result.output)
    return next(check for check in report["checks"] if check["name"] == "cache") | {"exit": result.exit_code}


def test_kernels_sha512_digest_is_what_kernlock_checks(tmp_path: Path) -> None:
    import hashlib

    from kernels._rust import Digest, DigestAlgorithm

    variant = tmp_path / "variant"
    (variant / "pkg").mkdir(parents=True)
    (variant / "pkg" / "__init__.py").write_bytes(b"X = 1\n")
    (variant / "_ops.so").write_bytes(bytes(range(256)) * 9)
    digest = Digest.hash_variant(DigestAlgorithm.SHA512, variant)  # kernels' own hashing is the oracle
    metadata = {"id": "_sha_1", "name": "sha", "version": 1, "license": "MIT", "python-depends": [],
                "backend": {"type": "cpu"}, "digest": {"algorithm": "sha512", "files": dict(digest.files)}}
    (variant / "metadata.json").write_text(json.dumps(metadata))
    files = tuple(LockedFile(path=p, sha256=hashlib.sha256((variant / p).read_bytes()).hexdigest(),
                             size=(variant / p).stat().st_size) for p in ("_ops.so", "metadata.json", "pkg/__init__.py"))
    parsed = variant_metadata((variant / "metadata.json").read_bytes())
    assert digest_problem(parsed, files, variant) is None and cached_digest_problem(variant, files) is None
    (variant / "_ops.so").write_bytes(b"\x01" + (variant / "_ops.so").read_bytes()[1:])  # one flipped byte
    assert digest_problem(parsed, files, variant) == "metadata.json's digest disagrees with the files (_ops.so)"


@pytest.mark.slow
def test_a_sha512_build_locks_verifies_and_loads(hub: TestHub, tmp_path: Path) -> None:
    project = tmp_path / "p"
    _locked(project, f"{SHA512}@v1")
    [variant] = load_lockfile(project / "kernels.lock").kernels[0].variants
    assert (variant.digest, variant.signed) == ("sha512", True)
    assert cli("sync", cwd=project).exit_code == 0
    cache = _verify_cache(project)
    assert cache["exit"] == 0 and cache["ok"], cache
    [loaded] = load_identities(project, [SHA512], version=1)
    assert loaded["build"] == "sha512 v1 #1"


def test_a_sha512_digest_the_files_disagree_with_is_refused_by_lock(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{SHA512}@v2"], targets=[CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code != 0
    assert "torch213-cxx11-cpu-x86_64-linux: metadata.json's digest disagrees with the files" in result.output
    assert "kernels would refuse to load it" in result.output
    assert not (project / "kernels.lock").exists()


@pytest.mark.slow
def test_a_wrong_sha512_of_an_lfs_file_fails_verify_cache_and_apply(hub: TestHub, tmp_path: Path) -> None:
    project = tmp_path / "p"
    _locked(project, f"{SHA512}@v3")  # the lock reads no LFS content, so it cannot see this one
    assert cli("sync", cwd=project).exit_code == 0
    cache = _verify_cache(project)
    assert cache["exit"] != 0 and not cache["ok"]
    [problem] = cache["problems"]
    assert problem["message"].endswith("metadata.json's digest disagrees with the files (sha512/_ops.so); kernels would "
                                       "refuse to load it")
    assert problem["fix"] == f"kernlock lock {SHA512}@<another revision>"
    loaded = python(f"import kernels, kernlock\nkernlock.apply()\nkernels.get_kernel({SHA512!r}, version=3)\n", project)
    assert loaded.returncode != 0
    assert "IntegrityError" in loaded.stderr and "metadata.json's digest disagrees with the files (sha512/_ops.so)" in loaded.stderr
