"""Signed builds: kernel-builder's Sigstore bundles verified at lock time, signers locked, re-verified offline.

The bundles are real: the fixture kernels' come from the test Sigstore (`kernlock.testing.sigstore`:
its own Fulcio root and intermediate, CT log and Rekor log), verified by sigstore-python against its
`trusted_root.json`; one is a bundle of the production Sigstore, verified against the production root
shipped in the sigstore package. Nothing leaves the loopback test Hub.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers import CPU, CUDA_X86, RELU, REPO_ROOT, cli, make_project
from kernlock._internal.lockfile.entries import Signature
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.rules.signatures import production_trusted_root, verify_bundle
from kernlock.testing.fixtures import move_branch, push_commit, rev_parse
from kernlock.testing.github_signer import GITHUB_ISSUER, KERNELS_COMMUNITY_BUILD
from kernlock.testing.hub import TestHub

SIGNED = "kernels-community/signed"
MY_ORG = "my-org/signed-kernel"
MY_ORG_BUILD = "https://github.com/my-org/kernels/.github/workflows/build.yaml@refs/heads/main"
CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"
ASSETS = REPO_ROOT / "fixtures" / "sigstore"


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
    assert 'version = "1.3"' in text and f'build-signer = "{KERNELS_COMMUNITY_BUILD}"' in text  # 1.3: the CUDA build records its archs


REFUSED = {
    "wrong-workflow": ("signed by https://github.com/huggingface/kernels-community/.github/workflows/manual.yaml"
                       "@refs/heads/main, expected https://github.com/huggingface/kernels-community/.github/workflows/"
                       "build.yaml@refs/heads/main or "),
    "wrong-ref": "signed by https://github.com/huggingface/kernels-community/.github/workflows/build.yaml@refs/heads/feature, expected ",
    "fork": (f"signed by {KERNELS_COMMUNITY_BUILD} running in https://github.com/attacker/kernels-community, "
             "expected it to run in https://github.com/huggingface/kernels-community (kernels' default policy"),
    "wrong-issuer": f"signed by {KERNELS_COMMUNITY_BUILD} through OIDC issuer https://gitlab.com, expected {GITHUB_ISSUER}",
    "other-root": "the signature does not verify against the Sigstore trusted root",
}


@pytest.mark.parametrize("branch", sorted(REFUSED))
def test_refused_signers_and_roots_never_touch_the_lock(hub: TestHub, tmp_path: Path, branch: str) -> None:
    """Wrong workflow, ref, fork, issuer or Sigstore: one line naming repo, variant, found and expected; lock unchanged."""
    project = make_project(tmp_path / "p", [f"{SIGNED}@v1"], targets=[CPU])
    assert lock(project).exit_code == 0
    before = (project / "kernels.lock").read_bytes()
    result = lock(project, f"{SIGNED}@{branch}")
    assert result.exit_code == 1, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"kernlock: error: {SIGNED} torch213-cxx11-cpu-x86_64-linux: ")
    assert REFUSED[branch] in line
    assert (project / "kernels.lock").read_bytes() == before
    assert f"{SIGNED}@{branch}" not in (project / "pyproject.toml").read_text()


def test_the_fix_for_an_unknown_workflow_works(hub: TestHub, tmp_path: Path) -> None:
    """The error's `[tool.kernlock.signers]` line, pasted into pyproject.toml, makes the same lock pass."""
    project = make_project(tmp_path / "p", [f"{SIGNED}@wrong-workflow"], targets=[CPU])
    result = lock(project)
    assert result.exit_code == 1
    entry = result.output.split("if you trust that signer, add ", 1)[1].split(" under [tool.kernlock.signers]")[0]
    with (project / "pyproject.toml").open("a") as pyproject:
        pyproject.write(f"\n[tool.kernlock.signers]\n{entry}\n")
    assert lock(project).exit_code == 0
    [variant] = load_lockfile(project / "kernels.lock").kernels[0].variants
    assert variant.signature.build_signer.endswith("/manual.yaml@refs/heads/main")


def test_the_fix_for_a_fork_works(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [], targets=[CPU])
    assert "lock a revision an allowed signer signed" in lock(project, f"{SIGNED}@fork").output
    assert lock(project, f"{SIGNED}@v1").exit_code == 0


def test_tampered_metadata_is_refused(hub: TestHub, tmp_path: Path) -> None:
    repo = hub.repo_path(SIGNED)
    path = f"build/{CPU_VARIANT}/metadata.json"
    original = subprocess.run(["git", "-C", str(repo), "show", f"v1:{path}"], capture_output=True, check=True).stdout
    push_commit(repo, "v1", {path: original.replace(b'"license": "Apache-2.0"', b'"license": "MIT"')}, "tamper")
    result = lock(make_project(tmp_path / "p", [f"{SIGNED}@v1"], targets=[CPU]))
    assert result.exit_code == 1
    assert f"{SIGNED} {CPU_VARIANT}: the signature does not verify" in result.output
    assert "Bundle message digest mismatch" in result.output


def test_a_file_that_disagrees_with_the_signed_digest_is_refused(hub: TestHub, tmp_path: Path) -> None:
    repo = hub.repo_path(SIGNED)
    push_commit(repo, "v1", {f"build/{CPU_VARIANT}/__init__.py": b"print('not the signed build')\n"}, "swap a file")
    result = lock(make_project(tmp_path / "p", [f"{SIGNED}@v1"], targets=[CPU]))
    assert result.exit_code == 1
    assert f"{SIGNED} {CPU_VARIANT}: the files disagree with the digest in its signed metadata.json (__init__.py)" in result.output


def test_unsigned_variants_are_recorded_unsigned_or_refused(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [f"{SIGNED}@unsigned"], targets=[CPU])
    assert lock(project).exit_code == 0
    [variant] = load_lockfile(project / "kernels.lock").kernels[0].variants
    assert not variant.signed and variant.signature is None
    strict = make_project(tmp_path / "strict", [f"{SIGNED}@unsigned"], targets=[CPU],
                          extra="require-signatures = true\n")
    result = lock(strict)
    assert result.exit_code == 1
    assert (f"kernlock: error: {SIGNED} {CPU_VARIANT}: unsigned (no metadata.json.sigstore), and [tool.kernlock] "
            "require-signatures = true; fix: lock a signed revision, or set require-signatures = false") in result.output
    assert not (strict / "kernels.lock").exists()
    pyproject = strict / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f"{SIGNED}@unsigned", f"{SIGNED}@v1"))  # "lock a signed revision"
    assert lock(strict).exit_code == 0
    pyproject.write_text(pyproject.read_text().replace(f"{SIGNED}@v1", f"{SIGNED}@unsigned")
                         .replace("require-signatures = true", "require-signatures = false"))
    downgrade = lock(strict)  # the lock now records a signed build of the repo: unsigned is a downgrade, refused
    assert downgrade.exit_code == 1 and "but the lock being replaced records signed builds" in downgrade.output


@pytest.mark.parametrize("policy", ["kernels' default", "an entry"])
def test_an_unsigned_build_where_signed_ones_are_expected_is_refused(hub: TestHub, tmp_path: Path, policy: str) -> None:
    """A compromised Hub account moves a signed branch to an unsigned build: with the default policy (kernels' signers
    for kernels-community/*) the re-lock is refused in one line, nothing written; the printed opt-out works as printed."""
    extra = "" if policy == "kernels' default" else f'[tool.kernlock.signers]\n"{SIGNED}" = ["{KERNELS_COMMUNITY_BUILD}"]\n'
    project = make_project(tmp_path / "p", [f"{SIGNED}@v1"], targets=[CPU], extra=extra)
    assert lock(project).exit_code == 0
    before = (project / "kernels.lock").read_bytes()
    repo = hub.repo_path(SIGNED)
    move_branch(repo, "v1", rev_parse(repo, "refs/heads/unsigned"))
    for command in (["-P", SIGNED], ["--upgrade"]):
        refused = lock(project, *command)  # before the fix: exit 0, the unsigned build locked in place of the signed one
        lines = refused.output.strip().splitlines()
        assert refused.exit_code == 1 and len(lines) == 1 and "Traceback" not in refused.output, refused.output
        assert (f"kernlock: error: {SIGNED} {CPU_VARIANT}: unsigned (no metadata.json.sigstore), but the lock being "
                f"replaced records signed builds of {SIGNED}") in lines[0]
        assert (project / "kernels.lock").read_bytes() == before
    fix = lines[0].split("fix: ", 1)[1]
    entry = fix.split("add ", 1)[1].split(" under [tool.kernlock.signers]")[0]
    assert entry == f'"{SIGNED}" = []'
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    text = (text.replace(f'"{SIGNED}" = ["{KERNELS_COMMUNITY_BUILD}"]', entry) if extra
            else text + f"\n[tool.kernlock.signers]\n{entry}\n")
    pyproject.write_text(text)  # the opt-out, as printed
    accepted = lock(project, "-P", SIGNED)
    assert accepted.exit_code == 0, accepted.output
    [variant] = load_lockfile(project / "kernels.lock").kernels[0].variants
    assert variant.signature is None


def test_an_unsigned_build_beside_signed_ones_of_its_commit_is_refused(hub: TestHub, tmp_path: Path) -> None:
    """One build of a commit carries no bundle while the others do: refused on a first lock too."""
    repo = hub.repo_path(SIGNED)
    cuda = "torch212-cxx11-cu128-x86_64-linux"
    commit = push_commit(repo, "v1", {f"build/{cuda}/metadata.json.sigstore": None}, "drop one bundle")
    result = lock(make_project(tmp_path / "p", [f"{SIGNED}@{commit}"], targets=[CUDA_X86]))
    assert result.exit_code == 1
    assert (f"{SIGNED} {cuda}: unsigned (no metadata.json.sigstore), but {CPU_VARIANT} of the same commit "
            f"{commit[:12]} is signed") in result.output


def test_a_repo_no_policy_names_is_verified_and_recorded(hub: TestHub, tmp_path: Path) -> None:
    """No signer entry, no default: the signature is verified and its identity recorded, unless signatures are required."""
    project = make_project(tmp_path / "p", [MY_ORG], targets=[CPU], extra=f'trust = ["{MY_ORG}"]\n')
    assert lock(project).exit_code == 0
    [variant] = load_lockfile(project / "kernels.lock").kernels[0].variants
    assert variant.signature.build_signer == MY_ORG_BUILD
    strict = make_project(tmp_path / "strict", [MY_ORG], targets=[CPU],
                          extra=f'trust = ["{MY_ORG}"]\nrequire-signatures = true\n')
    result = lock(strict)
    assert result.exit_code == 1
    assert f"no [tool.kernlock.signers] entry matches {MY_ORG} and require-signatures = true" in result.output
    entry = result.output.split("if you trust that signer, add ", 1)[1].split(" under [tool.kernlock.signers]")[0]
    assert entry == f'"{MY_ORG}" = ["{MY_ORG_BUILD}"]'
    with (strict / "pyproject.toml").open("a") as pyproject:
        pyproject.write(f"\n[tool.kernlock.signers]\n{entry.replace(MY_ORG, 'my-org/*')}\n")  # a glob covers it too
    assert lock(strict).exit_code == 0


def test_a_project_entry_overrides_kernels_default(hub: TestHub, tmp_path: Path) -> None:
    """`[tool.kernlock.signers]` wins over kernels' default for the repos it matches, the most specific entry first."""
    extra = f'[tool.kernlock.signers]\n"kernels-community/*" = ["{MY_ORG_BUILD}"]\n"{SIGNED}" = ["{KERNELS_COMMUNITY_BUILD}"]\n'
    assert lock(make_project(tmp_path / "ok", [f"{SIGNED}@v1"], targets=[CPU], extra=extra)).exit_code == 0
    result = lock(make_project(tmp_path / "no", [RELU], targets=[CPU], extra=extra))
    assert result.exit_code == 1
    assert f'expected {MY_ORG_BUILD} ([tool.kernlock.signers] "kernels-community/*")' in result.output


def test_the_readme_policy_snippet_and_default_signers_are_true(tmp_path: Path) -> None:
    """The `[tool.kernlock]` signature snippet of docs/how-to/signatures.md loads as written, and the kernels-community workflows it
    names are kernels' default policy for the installed kernels."""
    from kernlock._internal.compat.kernels_api import default_signers
    from kernlock._internal.project.config import load_project
    from kernlock._internal.project.signers import project_policy

    section = (REPO_ROOT / "docs" / "how-to" / "signatures.md").read_text()
    snippet = section.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "pyproject.toml").write_text(snippet)
    policy = project_policy(load_project(tmp_path))
    assert policy.signers == (("my-org/*", ("https://github.com/my-org/kernels/.github/workflows/build.yaml@refs/heads/main",)),)
    assert policy.trusted_root == tmp_path / "sigstore" / "trusted_root.json" and not policy.require
    text = " ".join(section.split())
    for repo, uris in default_signers():
        for uri in uris:
            workflow, ref = uri.split("/.github/workflows/")[1].split("@")
            assert f"`{workflow}`" in text and f"`{ref}`" in text and f"`{repo}`" in text, uri
