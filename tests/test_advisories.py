"""Advisories (issue 37): known-bad builds declared in a TOML file are kept out of locks, fail `verify`, and
`outdated` shows their fix. The bundled example is kernels-community#1085: v3 cu128 bad, cu130 good, v2 good."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import CUDA_130, CUDA_X86, FA2, REPO_ROOT, cli, make_project
from kernlock.store.lockfile_io import load_lockfile
from kernlock.testing.fixtures import rev_parse
from kernlock.testing.hub import TestHub

EXAMPLE = REPO_ROOT / "examples" / "advisories" / "kernels-community.toml"
V3 = f"{FA2}@v3"
ADVISED = 'advisories = ["advisories.toml"]\n'


def _project(root: Path, extra: str = ADVISED, advisories: str | None = None) -> Path:
    project = make_project(root, kernels=[V3], targets=[CUDA_X86, CUDA_130], extra="")
    text = (project / "pyproject.toml").read_text().replace("[tool.kernlock]\n", "[tool.kernlock]\n" + extra)
    (project / "pyproject.toml").write_text(text)
    if advisories is None:
        shutil.copy(EXAMPLE, project / "advisories.toml")
    else:
        (project / "advisories.toml").write_text(advisories)
    return project


def test_1085_keeps_v3_off_cu128_while_cu130_gets_v3(hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path / "p")

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    lock = load_lockfile(project / "kernels.lock")
    repo = hub.repo_path(FA2)
    v2, v3 = rev_parse(repo, "v2"), rev_parse(repo, "v3")
    assert lock.kernel(V3, CUDA_130).commit == v3 and lock.kernel(V3, CUDA_130).override is None
    cu128 = lock.kernel(V3, CUDA_X86)
    assert cu128.commit == v2 and cu128.ref == "v2"
    assert cu128.override.when == f"target={CUDA_X86}" and cu128.override.reason == "advisory KC-2026-1085: its fix, v2"
    # it says why: every v3 commit's cu128 build is advised, so the advisory's fix is taken
    assert (f"torch212-cxx11-cu128-x86_64-linux at {v3[:12]} for {CUDA_X86} is advised by KC-2026-1085 "
            "(kernels-community#1085): flash-attn2 v3's CUDA 12.8 builds fail in the GQA backward pass; "
            f"locked {v2[:12]} (its fix, v2) for it instead") in result.output
    assert f"{V3} [target={CUDA_X86}]  - -> {v2[:12]}  (advisory KC-2026-1085: its fix, v2)" in result.output
    verified = cli("verify", "--all-targets", cwd=project)
    assert verified.exit_code == 0, verified.output
    lock_text = (project / "kernels.lock").read_text()
    assert cli("lock", cwd=project).exit_code == 0 and (project / "kernels.lock").read_text() == lock_text


def test_verify_fails_on_an_older_lock_holding_the_bad_build(hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path / "p", extra="")  # locked before the project declared the advisory
    assert cli("lock", cwd=project).exit_code == 0
    lock = load_lockfile(project / "kernels.lock")
    assert lock.kernel(V3, CUDA_X86).commit == rev_parse(hub.repo_path(FA2), "v3")
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace("[tool.kernlock]\n", "[tool.kernlock]\n" + ADVISED))

    result = cli("verify", "--all-targets", cwd=project)

    assert result.exit_code == 1, result.output
    assert (f"{V3}: torch212-cxx11-cu128-x86_64-linux at {lock.kernel(V3, CUDA_X86).commit[:12]} "
            f"({CUDA_X86}) is advised by KC-2026-1085 (kernels-community#1085): flash-attn2 v3's CUDA 12.8 builds "
            "fail in the GQA backward pass") in result.output
    assert f"fix: kernlock lock (it re-pins those targets; the advisory's fix: {FA2}@v2)" in result.output
    outdated = cli("outdated", cwd=project)
    assert f"advised by KC-2026-1085; fix: {FA2}@v2 (kernlock lock re-pins it)" in outdated.output
    relocked = cli("lock", cwd=project)  # the fix verify names works
    assert relocked.exit_code == 0, relocked.output
    assert cli("verify", "--all-targets", cwd=project).exit_code == 0
