"""Advisories (issue 37): known-bad builds declared in a TOML file are kept out of locks, fail `verify`, and
`outdated` shows their fix. The bundled example is kernels-community#1085: v3 cu128 bad, cu130 good, v2 good."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from helpers import CPU, CUDA_130, CUDA_X86, FA2, REPO_ROOT, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
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


def test_a_bounded_range_sends_the_entry_to_the_nearest_good_commit_of_its_branch(hub: TestHub, tmp_path: Path) -> None:
    repo = hub.repo_path(FA2)
    tip, before = rev_parse(repo, "v2"), rev_parse(repo, "v2~1")
    advisory = f'''
[[advisory]]
id = "ORG-1"
repo = "{FA2}"
summary = "v2's last rebuild of the CPU builds is broken"
[advisory.affected]
branch = "v2"
introduced = "{tip}"
variants = ["*-cpu-*"]
[advisory.fix]
version = 1
'''
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU], extra=ADVISED)
    (project / "advisories.toml").write_text(advisory)

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    [entry] = load_lockfile(project / "kernels.lock").kernels
    assert (entry.commit, entry.ref, entry.override) == (before, "v2", None)  # the same branch, not the fix's v1
    assert f"{FA2}@v2  - -> {before[:12]}  (advisory ORG-1: nearest good commit of v2)" in result.output
    verified = cli("verify", cwd=project)  # offline, v2~1 cannot be placed in the range: a note, not a failure
    assert verified.exit_code == 0, verified.output
    assert f"whether {before[:12]} lies in ORG-1's range of v2 needs the branch's history" in verified.output


def test_a_bad_advisory_file_is_one_line_with_its_fix(hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path / "p", advisories='[[advisory]]\nid = "X"\nrepo = "a/b"\nsummary = "s"\n')

    result = cli("lock", cwd=project)

    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "kernlock: error: advisories.toml: advisory[0] (X): say which builds it affects in [advisory.affected] "
        "(branch, commits, variants or sha256); fix: correct advisories.toml (the format: docs/how-to/advisories.md) or "
        "remove it from [tool.kernlock] advisories"]
    assert not (project / "kernels.lock").exists()


def test_advisories_from_a_url(hub: TestHub, tmp_path: Path) -> None:
    import http.server
    import threading
    from functools import partial

    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(EXAMPLE, served / "kernels-community.toml")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/kernels-community.toml"
        project = _project(tmp_path / "p", extra=f'advisories = ["{url}"]\n')
        result = cli("lock", cwd=project)
        assert result.exit_code == 0, result.output
        assert load_lockfile(project / "kernels.lock").kernel(V3, CUDA_X86).ref == "v2"
        gone = f"http://127.0.0.1:{server.server_address[1]}/missing.toml"
        text = (project / "pyproject.toml").read_text().replace(url, gone)
        (project / "pyproject.toml").write_text(text)
        failed = cli("verify", cwd=project)
        assert failed.exit_code == 1
        assert f"advisories {gone}: cannot be fetched" in failed.output
    finally:
        server.shutdown()


def test_advisory_text_cannot_forge_verify_lines(hub: TestHub, tmp_path: Path) -> None:
    """Issue 44, class 13: CR/LF and escapes in an advisory's text are printed escaped, on the advisory's line."""
    project = _project(tmp_path / "p", extra="")
    assert cli("lock", cwd=project).exit_code == 0
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace("[tool.kernlock]\n", "[tool.kernlock]\n" + ADVISED))
    forged = "\\nok   coverage (every target)\\r\\u001b[2K"  # TOML escapes: a newline, a CR and ESC in the value
    advisories = EXAMPLE.read_text()
    summary = re.search(r'^summary = "(.*)"$', advisories, re.M)
    assert summary is not None
    (project / "advisories.toml").write_text(advisories.replace(summary.group(0), f'summary = "{summary.group(1)}{forged}"'))
    result = cli("verify", "--all-targets", cwd=project)
    assert result.exit_code == 1, result.output
    assert not [line for line in result.output.splitlines() if line.startswith("ok   coverage (every target)")]
    assert "\x1b" not in result.output and "\r" not in result.output
    assert "\\nok   coverage (every target)\\r\\x1b[2K" in result.output  # shown, escaped, where it was
