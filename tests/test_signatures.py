"""Signed builds: kernel-builder's Sigstore bundles verified at lock time, signers locked, re-verified offline.

The bundles are real: the fixture kernels' come from the test Sigstore (`kernlock.testing.sigstore`:
its own Fulcio root and intermediate, CT log and Rekor log), verified by sigstore-python against its
`trusted_root.json`; one is a bundle of the production Sigstore, verified against the production root
shipped in the sigstore package. Nothing leaves the loopback test Hub.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import CPU, CUDA_X86, RELU, cli, make_project
from kernlock.lockfile import Signature
from kernlock.lockfile_toml import load_lockfile
from kernlock.signatures import production_trusted_root, verify_bundle
from kernlock.testing.fixtures import push_commit, rev_parse
from kernlock.testing.hub import TestHub
from kernlock.testing.sigstore import GITHUB_ISSUER, KERNELS_COMMUNITY_BUILD

SIGNED = "kernels-community/signed"
MY_ORG = "my-org/signed-kernel"
MY_ORG_BUILD = "https://github.com/my-org/kernels/.github/workflows/build.yaml@refs/heads/main"
ASSETS = Path(__file__).resolve().parent.parent / "fixtures" / "sigstore"


def lock(project: Path, *args: str):
    return cli("lock", *args, cwd=project)


def test_production_bundle_verifies_offline_against_the_shipped_root() -> None:
    """A real bundle of the production Sigstore (GitHub Actions, sigstore-python's test asset) through kernlock's code."""
    signature = verify_bundle((ASSETS / "bundle_v3_github.whl").read_bytes(),
                              (ASSETS / "bundle_v3_github.whl.sigstore").read_bytes(), production_trusted_root())
    assert signature == Signature(
        issuer=GITHUB_ISSUER,
        build_signer="https://github.com/trailofbits/rfc8785.py/.github/workflows/release.yml@refs/tags/v0.1.2",
        source_repository="https://github.com/trailofbits/rfc8785.py",
        source_commit="d8b4a6445f38c48b9137a8099706d9b8073146e4", log_index=79605083, integrated_time=1710888076)
    assert "sigstore.dev" in str(production_trusted_root())


def test_lock_records_who_signed(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [f"{SIGNED}@v1"], targets=[CPU, CUDA_X86])
    result = lock(project)
    assert result.exit_code == 0, result.output
    entry = load_lockfile(project / "kernels.lock").kernels[0]
    for variant in entry.variants:
        assert variant.signed and variant.digest == "sha256"
        assert variant.signature.build_signer == KERNELS_COMMUNITY_BUILD
        assert variant.signature.issuer == GITHUB_ISSUER
        assert variant.signature.source_repository == "https://github.com/huggingface/kernels-community"
        assert variant.signature.source_commit == "5" * 40
        assert variant.signature.log_index >= 5 and variant.signature.integrated_time > 1_700_000_000
    text = (project / "kernels.lock").read_text()
    assert 'version = "1.1"' in text and f'build-signer = "{KERNELS_COMMUNITY_BUILD}"' in text
