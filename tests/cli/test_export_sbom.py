"""`kernlock export --format cyclonedx` (issue 48 item 3): the lock as a CycloneDX SBOM, validated by
cyclonedx-python-lib's own strict JSON validator."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

from helpers import (
    CPU,
    CUDA_X86,
    REPO_ROOT,
    WITH_DEP,
    cli,
    make_project,
    markdown_blocks,
    quick_start_blocks,
    run_bash,
    tiny_model_and_data,
)
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.github_signer import GITHUB_ISSUER, KERNELS_COMMUNITY_BUILD
from kernlock.testing.hub import TestHub

SIGNED = "kernels-community/signed"


def valid_bom(text: str) -> dict:
    """The document, once the library's strict validator for CycloneDX 1.6 finds nothing wrong with it."""
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    return json.loads(text)


def properties(component: dict, name: str) -> list[str]:
    return [p["value"] for p in component.get("properties", []) if p["name"] == f"kernlock:{name}"]


@pytest.mark.slow
def test_the_quick_start_lock_exports_one_valid_component_per_locked_variant(hub: TestHub, tmp_path: Path) -> None:
    """The README's quick start locked as written, then synced for this machine: the SBOM validates, has one
    component per locked variant with each locked file's sha256 and size, its targets and GPU archs, and the
    license of metadata.json for the variants in the cache (the lock does not record it; nothing asks the Hub)."""
    project = tmp_path / "my-training-project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "my-training-project"\nversion = "0"\n')
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    tiny_model_and_data(project)
    locked = run_bash(quick_start_blocks("bash")[0], tmp_path)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    assert cli("sync", cwd=project).exit_code == 0
    lock = load_lockfile(project / "kernels.lock")
    hub.reset_counts()

    result = cli("export", "--format", "cyclonedx", "-o", "kernels.cdx.json", cwd=project)
    assert result.exit_code == 0, result.output
    assert not hub.requests  # the lock and the cache only
    bom = valid_bom((project / "kernels.cdx.json").read_text())
    assert bom["specVersion"] == "1.6" and bom["metadata"]["tools"]["components"][0]["name"] == "kernlock"
    by_ref = {c["bom-ref"]: c for c in bom["components"]}
    expected = {(k, v) for k in lock.kernels for v in k.variants}
    assert len(bom["components"]) == len(expected) == len(by_ref) > 3
    machine = next(t for t in lock.targets if "-cpu-" in str(t))
    for kernel, variant in expected:
        component = by_ref[f"pkg:huggingface/{kernel.repo}@{kernel.commit}?repo_type=kernel#build/{variant.name}"]
        purl = PackageURL.from_string(component["purl"])
        assert (purl.type, f"{purl.namespace}/{purl.name}", purl.version) == ("huggingface", kernel.repo, kernel.commit)
        assert purl.qualifiers == {"repo_type": "kernel"} and purl.subpath == f"build/{variant.name}"
        assert properties(component, "variant") == [variant.name] and properties(component, "spec") == [kernel.spec]
        assert properties(component, "target") == [str(t) for t in variant.targets]
        assert properties(component, "gpu-arch") == list(variant.archs)
        files = {f["name"]: f for f in component["components"]}
        assert {f.path: f.sha256 for f in variant.files} == {
            name: f["hashes"][0]["content"] for name, f in files.items()
        }
        assert all(f["hashes"][0]["alg"] == "SHA-256" and f["type"] == "file" for f in files.values())
        assert [properties(files[f.path], "size") for f in variant.files] == [[str(f.size)] for f in variant.files]
        licenses = [entry["license"]["id"] for entry in component.get("licenses", [])]
        assert licenses == (["Apache-2.0"] if machine in variant.targets else [])  # cached: this machine's only
    assert any(properties(c, "gpu-arch") for c in bom["components"])  # the cu128 target's builds name their archs


def test_signers_and_kernel_dependencies_are_in_the_sbom(hub: TestHub, tmp_path: Path) -> None:
    """The signer identity the lock records for a signed build, and a kernel's kernel-depends as the BOM's
    dependency graph, target by target."""
    project = make_project(tmp_path / "p", [f"{SIGNED}@v1", WITH_DEP], targets=[CPU, CUDA_X86])
    assert cli("lock", cwd=project).exit_code == 0
    lock = load_lockfile(project / "kernels.lock")
    result = cli("export", "--format", "cyclonedx", cwd=project)
    assert result.exit_code == 0, result.output
    bom = valid_bom(result.stdout)
    signed = [c for c in bom["components"] if c["name"] == SIGNED.split("/")[1]]
    assert signed and all(properties(c, "signer:build-signer") == [KERNELS_COMMUNITY_BUILD]
                          and properties(c, "signer:issuer") == [GITHUB_ISSUER] for c in signed)
    [entry] = [k for k in lock.kernels if k.repo == WITH_DEP]
    [dep_spec] = entry.depends
    graph = {d["ref"]: set(d.get("dependsOn", [])) for d in bom["dependencies"]}
    for variant in entry.variants:
        ref = f"pkg:huggingface/{entry.repo}@{entry.commit}?repo_type=kernel#build/{variant.name}"
        wanted = set()
        for target in variant.targets:
            dep = lock.kernel(dep_spec, target)
            found = dep.variant_for(target)
            wanted.add(f"pkg:huggingface/{dep.repo}@{dep.commit}?repo_type=kernel#build/{found.name}")
        assert graph[ref] == wanted and wanted


def test_export_never_writes_over_a_file_of_another_kind_and_its_fix_works(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [WITH_DEP], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    before = (project / "pyproject.toml").read_bytes()
    result = cli("export", "--format", "cyclonedx", "-o", "pyproject.toml", cwd=project)
    assert result.exit_code == 2 and (project / "pyproject.toml").read_bytes() == before
    assert "pyproject.toml exists and is not a CycloneDX SBOM; nothing was written" in result.output, result.output
    fix = result.output.split("fix: export elsewhere, e.g. ")[1].strip()
    assert fix == "-o kernels.cdx.json"
    again = cli("export", "--format", "cyclonedx", *shlex.split(fix), cwd=project)
    assert again.exit_code == 0, again.output
    valid_bom((project / "kernels.cdx.json").read_text())
    third = cli("export", "--format", "cyclonedx", *shlex.split(fix), cwd=project)  # its own output: replaced
    assert third.exit_code == 0, third.output


def test_without_cyclonedx_python_lib_one_line_names_the_install(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [WITH_DEP], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    code = "import sys; sys.modules['cyclonedx'] = None; from kernlock._internal.cli.main import main; main()"
    proc = subprocess.run([sys.executable, "-c", code, "export", "--format", "cyclonedx"], cwd=project,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "kernlock: error: --format cyclonedx needs cyclonedx-python-lib, which is not installed; "
        "fix: pip install 'cyclonedx-python-lib>=11.12,<12'"
    ]


def test_the_how_to_block_runs_as_written(hub: TestHub, tmp_path: Path) -> None:
    """docs/how-to/sbom.md's commands, verbatim: sync, then the SBOM with a license on every synced variant."""
    [block] = markdown_blocks((REPO_ROOT / "docs" / "how-to" / "sbom.md").read_text(), "bash")
    project = make_project(tmp_path / "p", [WITH_DEP], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    ran = run_bash(block, project)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    bom = valid_bom((project / "kernels.cdx.json").read_text())
    assert len(bom["components"]) == 2  # with-dep and the activation it depends on, one variant each
    assert all(entry["license"]["id"] == "Apache-2.0" for c in bom["components"] for entry in c["licenses"])
