"""`kernlock lock` against the test Hub: specs, sources, targets, pins, failures."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from helpers import ARM, CPU, CUDA_130, CUDA_X86, FA2, cli, make_project
from kernlock._internal.compat.transformers import default_version
from kernlock._internal.host import installed_version
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.spec.target import parse_target
from kernlock.testing.fixtures import advance_branch, rev_parse
from kernlock.testing.hub import TestHub


def lock_of(project: Path):
    return load_lockfile(project / "kernels.lock")


def test_every_spec_form_resolves_to_a_full_sha(hub: TestHub, tmp_path: Path) -> None:
    repo = hub.repo_path(FA2)
    v2 = rev_parse(repo, "v2")
    tagged = hub.repo_path("kernels-community/tagged")
    project = make_project(tmp_path / "p", kernels=[
        FA2, f"{FA2}@v2", f"{FA2}:flash_attn_func", f"paged|{FA2}@v3", f"{FA2}@{v2}",
        "kernels-community/tagged@v1.0.0", "kernels-community/tagged@dev", "flash_attention_2",
        "kernels-community/universal@v1",
    ])
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    lock = lock_of(project)
    by_spec = {k.spec: k for k in lock.kernels}
    assert set(by_spec) == {
        FA2, f"{FA2}@v2", f"{FA2}@v3", f"{FA2}@{v2}", "kernels-community/tagged@v1.0.0",
        "kernels-community/tagged@dev", "kernels-community/universal@v1",
    }
    assert by_spec[FA2].version == 4 and by_spec[FA2].ref == "v4"
    assert by_spec[FA2].commit == rev_parse(repo, "v4")
    assert by_spec[FA2].resolution.startswith(f"default of transformers {installed_version('transformers')} on torch 2.13")
    assert set(by_spec[FA2].requested) == {FA2, "flash_attention_2"}
    assert by_spec[f"{FA2}@v2"].commit == v2 and by_spec[f"{FA2}@{v2}"].commit == v2
    assert by_spec[f"{FA2}@v3"].commit == rev_parse(repo, "v3")
    assert by_spec["kernels-community/tagged@v1.0.0"].commit == rev_parse(tagged, "v1.0.0")
    assert by_spec["kernels-community/tagged@v1.0.0"].resolution == "tag v1.0.0"
    assert by_spec["kernels-community/tagged@dev"].commit == rev_parse(tagged, "dev")
    assert by_spec["kernels-community/universal@v1"].variant_for(CPU).name == "torch-universal"
    assert all(len(k.commit) == 40 for k in lock.kernels)


def test_sources_are_merged(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], extra=(
        '\n[tool.kernels.dependencies]\n"kernels-community/activation" = 1\n'
    ))
    (project / "train.py").write_text(
        "from transformers import AutoModelForCausalLM\n"
        f"model = AutoModelForCausalLM.from_pretrained('m', attn_implementation='{FA2}@v3')\n"
        "cfg = {'attn_implementation': 'kernels-community/universal@v1'}\n"
        "other = dict(attn_implementation='sdpa')\n"
    )
    (project / "sft.yaml").write_text("model:\n  attn_implementation: kernels-community/tagged@dev  # pinned\n")
    (project / "launch.sh").write_text(
        f"trl sft --attn_implementation {FA2}@v4 \\\n  --max_steps 2\naccelerate launch x.py --attn-implementation=kernels-community/tagged@v1\n"
    )
    result = cli("lock", "--scan", "train.py", "--scan", "sft.yaml", "--scan", "launch.sh", "kernels-community/with-dep@v1", cwd=project)
    assert result.exit_code == 0, result.output
    lock = lock_of(project)
    assert set(lock.inputs) == {
        f"{FA2}@v2", f"{FA2}@v3", f"{FA2}@v4", "kernels-community/activation@v1", "kernels-community/universal@v1",
        "kernels-community/tagged@dev", "kernels-community/tagged@v1", "kernels-community/with-dep@v1",
    }
    # A command-line spec is recorded in pyproject.toml, like `uv add`.
    assert '"kernels-community/with-dep@v1"' in (project / "pyproject.toml").read_text()


def test_use_kernels_source_is_opt_in(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], extra='use-kernels = ["kernels-community/activation"]\n')
    assert cli("lock", cwd=project).exit_code == 0
    assert "kernels-community/activation@v1" in lock_of(project).inputs


def test_targets_choose_the_variant_kernels_would(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v4"], targets=[CPU, CUDA_X86, CUDA_130, ARM, "torch2.9-cxx11-cu128-x86_64-linux"])
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    kernel = lock_of(project).kernels[0]
    assert {t: kernel.variant_for(t).name for t in (CPU, CUDA_X86, CUDA_130, ARM)} == {
        CPU: "torch213-cxx11-cpu-x86_64-linux",
        CUDA_X86: "torch212-cxx11-cu128-x86_64-linux",
        CUDA_130: "torch211-cxx11-cu130-x86_64-linux",
        ARM: "torch210-cxx11-cu128-aarch64-linux",
    }
    # CUDA 12.8 on torch 2.9 takes the highest compatible minor (12.8 over 12.6), as kernels ranks it.
    assert kernel.variant_for("torch2.9-cxx11-cu128-x86_64-linux").name == "torch29-cxx11-cu128-x86_64-linux"


def test_file_hashes_match_the_repository_content(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"])
    assert cli("lock", cwd=project).exit_code == 0
    kernel = lock_of(project).kernels[0]
    variant = kernel.variant_for(CPU)
    import subprocess

    repo = hub.repo_path(FA2)
    for locked in variant.files:
        blob = subprocess.run(
            ["git", "-C", str(repo), "show", f"{kernel.commit}:build/{variant.name}/{locked.path}"],
            capture_output=True, check=True,
        ).stdout
        assert hashlib.sha256(blob).hexdigest() == locked.sha256
        assert len(blob) == locked.size
    assert any(f.path.endswith("_ops.so") for f in variant.files)


def test_missing_variant_fails_with_reasons_and_a_way_out(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v1"], targets=[CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code == 1
    message = result.output.strip()
    assert message.startswith(f"kernlock: error: {FA2}@v1")
    assert f"has no build for {CPU}: nearest torch212-cxx11-cpu-x86_64-linux (Torch 2.12, not 2.13)" in message
    assert f"{FA2}@v4 has torch213-cxx11-cpu-x86_64-linux for it" in message
    assert message.endswith(f"fix: pin {FA2}@v4 in its spec and run `kernlock lock`, or drop the target")
    assert len(message.splitlines()) == 1
    assert not (project / "kernels.lock").exists()


def test_transitive_kernel_dependencies_are_locked(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=["kernels-community/with-dep@v1"])
    assert cli("lock", cwd=project).exit_code == 0
    lock = lock_of(project)
    dep = lock.kernel("kernels-community/activation@v1")
    assert dep is not None and dep.dependency_of == ("kernels-community/with-dep@v1",)
    assert lock.kernel("kernels-community/with-dep@v1").depends == ("kernels-community/activation@v1",)
    assert dep.variant_for(CPU) is not None


def test_untrusted_publisher_fails_unless_allowlisted(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=["untrusted-org/some-kernel@v1"])
    result = cli("lock", cwd=project)
    assert result.exit_code == 1
    assert "publisher 'untrusted-org' is not a trusted kernel publisher" in result.output
    assert "[tool.kernlock] trust" in result.output
    assert not (project / "kernels.lock").exists()
    make_project(project, kernels=["untrusted-org/some-kernel@v1"], extra='trust = ["untrusted-org/some-kernel"]\n')
    assert cli("lock", cwd=project).exit_code == 0
    assert lock_of(project).kernels[0].trust == "allowlist"
    assert lock_of(project.parent / "p").kernels[0].repo == "untrusted-org/some-kernel"


def test_locking_is_deterministic(hub: TestHub, tmp_path: Path) -> None:
    kernels = [FA2, "kernels-community/with-dep@v1", "kernels-community/tagged@v1"]
    first = make_project(tmp_path / "a", kernels=kernels, targets=[CPU, CUDA_X86])
    second = make_project(tmp_path / "b", kernels=list(reversed(kernels)), targets=[CUDA_X86, CPU])
    assert cli("lock", cwd=first).exit_code == 0
    assert cli("lock", cwd=second).exit_code == 0
    text = (first / "kernels.lock").read_bytes()
    assert text == (second / "kernels.lock").read_bytes()
    assert cli("lock", "--upgrade", cwd=first).exit_code == 0
    assert (first / "kernels.lock").read_bytes() == text


def test_relock_keeps_pins_when_a_branch_moves(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2, "kernels-community/tagged@dev"])
    assert cli("lock", cwd=project).exit_code == 0
    before = (project / "kernels.lock").read_bytes()
    old_fa2 = lock_of(project).kernel(FA2).commit
    moved = advance_branch(hub.repo_path(FA2), "v4")
    moved_dev = advance_branch(hub.repo_path("kernels-community/tagged"), "dev")
    hub.reset_counts()
    assert cli("lock", cwd=project).exit_code == 0
    assert (project / "kernels.lock").read_bytes() == before
    assert sum(hub.requests.values()) == 0  # kept pins cost no Hub request

    result = cli("lock", "--upgrade-kernel", FA2, cwd=project)
    assert result.exit_code == 0, result.output
    lock = lock_of(project)
    assert lock.kernel(FA2).commit == moved != old_fa2
    assert lock.kernel("kernels-community/tagged@dev").commit != moved_dev

    assert cli("lock", "--upgrade", cwd=project).exit_code == 0
    assert lock_of(project).kernel("kernels-community/tagged@dev").commit == moved_dev


def test_removed_specs_drop_out(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2, "kernels-community/tagged@dev"])
    assert cli("lock", cwd=project).exit_code == 0
    make_project(project, kernels=[FA2])
    result = cli("lock", cwd=project)
    assert "1 removed" in result.output
    assert [k.spec for k in lock_of(project).kernels] == [FA2]


def test_network_failure_leaves_the_previous_lock_byte_identical(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2])
    assert cli("lock", cwd=project).exit_code == 0
    before = (project / "kernels.lock").read_bytes()
    pyproject = (project / "pyproject.toml").read_bytes()
    hub.add_fault("status", match="/tree/", times=100, code=503)
    result = cli("lock", "kernels-community/tagged@dev", "--upgrade", cwd=project)
    assert result.exit_code == 1
    assert "the Hub answered HTTP 503" in result.output
    assert hub.fired["status"] >= 1
    assert (project / "kernels.lock").read_bytes() == before
    assert (project / "pyproject.toml").read_bytes() == pyproject


def test_transient_errors_are_retried(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2])
    hub.add_fault("status", match="/refs", times=2, code=502)
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert hub.requests["refs"] == 3 and hub.fired["status"] == 2


@pytest.mark.parametrize("bad", ["org/", "a/b@", "a/b@x@y", "a b/c", "../x/y"])
def test_bad_specs_exit_2_and_leave_the_lock_alone(hub: TestHub, tmp_path: Path, bad: str) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2])
    assert cli("lock", cwd=project).exit_code == 0
    before = (project / "kernels.lock").read_bytes()
    (project / "train.py").write_text(f"x = 1\nmodel = load(attn_implementation={bad!r})\n")
    result = cli("lock", "--scan", "train.py", cwd=project)
    assert result.exit_code == 2
    assert "train.py:2" in result.output and repr(bad) in result.output
    assert (project / "kernels.lock").read_bytes() == before


def test_json_summary(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU, CUDA_X86])
    result = cli("lock", "--json", cwd=project)
    data = json.loads(result.output)
    assert data["lock"] == load_lockfile(project / "kernels.lock").to_dict()
    variants = {t: v["name"] for v in data["lock"]["kernel"][0]["variant"] for t in v["targets"]}
    assert variants == {CPU: "torch213-cxx11-cpu-x86_64-linux", CUDA_X86: "torch212-cxx11-cu128-x86_64-linux"}
    assert data["added"] == [f"{FA2}@v2"]


def test_all_variants_locks_every_build(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"])
    assert cli("lock", "--all-variants", cwd=project).exit_code == 0
    kernel = lock_of(project).kernels[0]
    assert {v.name for v in kernel.variants} == set(kernel.build_variants)
    assert len(kernel.variants) > 5


def test_lock_agrees_with_what_kernels_loads(hub: TestHub, tmp_path: Path) -> None:
    import kernels

    specs: dict[str, dict[str, Any]] = {f"{FA2}@v2": {"version": 2}, f"{FA2}@v4": {"version": 4}, "kernels-community/universal@v1": {"version": 1},
             "kernels-community/tagged@dev": {"revision": "dev"}}
    project = make_project(tmp_path / "p", kernels=list(specs))
    assert cli("lock", cwd=project).exit_code == 0
    lock = lock_of(project)
    target = str(importlib.import_module("kernlock._internal.compat.kernels_api").kernels_target())
    for spec, kwargs in specs.items():
        module = kernels.get_kernel(lock.kernel(spec).repo, **kwargs)
        assert module.KERNEL_IDENTITY["variant"] == lock.kernel(spec).variant_for(target).name
        assert module.KERNEL_IDENTITY["commit"] == lock.kernel(spec).commit


def test_short_shas_expand_and_must_be_unambiguous(hub: TestHub, tmp_path: Path) -> None:
    repo = hub.repo_path(FA2)
    v1_first = rev_parse(repo, "v1~1")
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@{v1_first[:10]}"], targets=[CUDA_X86])
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert lock_of(project).kernels[0].commit == v1_first
    make_project(project, kernels=[f"{FA2}@0000000"], targets=[CUDA_X86])
    result = cli("lock", cwd=project)
    assert result.exit_code == 1 and "no commit starting with '0000000'" in result.output


def test_bare_spec_warns_when_a_target_would_get_another_default(hub: TestHub, tmp_path: Path) -> None:
    old_torch = "torch2.9-cxx11-cu128-x86_64-linux"
    project = make_project(tmp_path / "p", kernels=[FA2], targets=[CPU, old_torch])
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    # Transformers 5.18-5.24 default flash-attn2 to v3 below torch 2.10; 5.25 to v4 on every torch
    differs = default_version(FA2, parse_target(old_torch))[0] != default_version(FA2, parse_target(CPU))[0]
    assert differs == (Version(installed_version("transformers")) < Version("5.25"))
    assert ("would default to another version on torch2.9-cxx11-cu128-x86_64-linux" in result.output) == differs
    assert lock_of(project).kernels[0].version == 4


def test_scan_reports_each_site_it_cannot_read(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    (project / "train.py").write_text(
        f'attn = os.environ["ATTN"]\nload(attn_implementation=attn)\nload(attn_implementation="{FA2}@v2")\n'
        'cfg = {"attn_implementation": f"kernels-community/{name}"}\n'
    )
    (project / "run.sh").write_text('trl sft --attn_implementation "$ATTN" --max_steps 2\n')
    result = cli("lock", "--scan", "train.py", "--scan", "run.sh", cwd=project)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("kernlock: warning: ")]
    fix = "is not a literal, so --scan cannot lock what it names; list that kernel in [tool.kernlock] kernels"
    assert warnings == [
        f"kernlock: warning: train.py:2: attn_implementation=attn {fix}",
        f"kernlock: warning: train.py:4: attn_implementation=f'kernels-community/{{name}}' {fix}",
        f"kernlock: warning: run.sh:1: attn_implementation=$ATTN {fix}",
    ]
    assert [k.spec for k in lock_of(project).kernels] == [f"{FA2}@v2"]


def test_on_a_tty_the_progress_line_is_cleared_before_an_error(hub: TestHub, tmp_path: Path) -> None:
    """stderr on a pseudo-terminal: progress is drawn, then erased, then the one error line."""
    import os
    import pty
    import subprocess
    import sys

    project = make_project(tmp_path / "p", kernels=["kernels-community/activation@v1"])
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "kernlock", "lock", "kernels-community/no-such-kernel"],
                                cwd=project, stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL)
        os.close(follower)
        output = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal (EIO)
                break
            if not chunk:
                break
            output += chunk
        assert proc.wait(timeout=120) != 0
    finally:
        os.close(leader)
    error = output.index(b"kernlock: error: ")
    drawn, erased = output[:error], b"\r" + b" " * 100 + b"\r"
    assert b"resolving" in drawn and drawn.endswith(erased), drawn
    assert b"\r" not in output[error:].rstrip(b"\r\n") and output[error:].count(b"\n") == 1  # one line, intact
