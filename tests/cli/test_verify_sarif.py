"""`kernlock verify --format sarif` (issue 48 item 4): the report as SARIF 2.1.0, validated against the
official schema (tests/data/sarif-schema-2.1.0.json, from github.com/oasis-tcs/sarif-spec,
sarif-2.1/schema/) with jsonschema, with stable rule ids and locations in kernels.lock and pyproject.toml."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema

from helpers import ARM, CUDA_X86, FA2, REPO_ROOT, cli, make_project, markdown_blocks, run_bash
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.verify.sarif import RULES
from kernlock.testing.hub import TestHub
from scripts import tiny

SCHEMA = json.loads((REPO_ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
CU126 = "torch2.10-cxx11-cu126-x86_64-linux"  # the fixtures' layer kernels have no build for it
V3 = f"{FA2}@v3"
LIGER = "kernels-community/liger-kernels@v4"
UNIVERSAL = "kernels-community/universal"


def valid_sarif(text: str) -> dict:
    log = json.loads(text)
    jsonschema.validate(log, SCHEMA, cls=jsonschema.Draft4Validator)  # the schema's own draft
    return log


def line_of(path: Path, needle: str, after: int = 0) -> int:
    """The number of the first line past line `after` that holds `needle`."""
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if n > after and needle in text)


def test_rule_ids_are_stable() -> None:
    """Ids are never renumbered or reused: a change to this table is a change of the format."""
    assert [(r.id, r.name) for r in RULES] == [
        ("KL001", "invalid-lock"), ("KL002", "stale-lock"), ("KL003", "uncovered-target"),
        ("KL004", "native-fallback"), ("KL005", "unsupported-gpu-arch"), ("KL006", "cannot-load-here"),
        ("KL007", "advised-build"), ("KL008", "expired-ignore"), ("KL009", "cache-mismatch"),
        ("KL010", "signature-mismatch"), ("KL011", "hub-mismatch"), ("KL012", "run-record-mismatch"),
    ]


def test_sarif_reports_advised_uncovered_stale_native_and_expired_ignores_where_they_are(
        hub: TestHub, tmp_path: Path) -> None:
    """A lock with native layers on one target, then an advisory covering its v3 cu128 build, an ignore of it
    that expired, a spec added to pyproject.toml and a target it never locked: each finding is a result of its
    rule, placed on its line of kernels.lock or pyproject.toml, and the log validates against SARIF 2.1.0."""
    project = make_project(tmp_path / "p", kernels=[V3], targets=[CUDA_X86, CU126], extra='\nmodels = ["./model"]')
    tiny.model("sdpa").save_pretrained(project / "model")
    assert cli("lock", cwd=project).exit_code == 0
    shutil.copy(REPO_ROOT / "examples" / "advisories" / "kernels-community.toml", project / "advisories.toml")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'"{V3}"', f'"{V3}", "{UNIVERSAL}"').replace(
        "[tool.kernlock]\n", '[tool.kernlock]\nadvisories = ["advisories.toml"]\n'
        'ignore-advisories = [{ id = "KC-2026-1085", until = "2026-01-31", reason = "triage" }]\n'))

    result = cli("verify", "--all-targets", "--target", ARM, "--format", "sarif", cwd=project)

    assert result.exit_code == 1
    log = valid_sarif(result.stdout)
    [run] = log["runs"]
    assert run["tool"]["driver"]["name"] == "kernlock" and run["invocations"][0]["exitCode"] == 1
    assert run["originalUriBaseIds"]["PROJECTROOT"]["uri"] == project.resolve().as_uri() + "/"
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.id for r in RULES]
    found: dict[str, list[dict]] = {}
    for entry in run["results"]:
        assert rules[entry["ruleIndex"]]["id"] == entry["ruleId"]
        found.setdefault(rules[entry["ruleIndex"]]["name"], []).append(entry)

    def where(entry: dict) -> tuple[str, int | None]:
        physical = entry["locations"][0]["physicalLocation"]
        assert physical["artifactLocation"]["uriBaseId"] == "PROJECTROOT"
        return physical["artifactLocation"]["uri"], physical.get("region", {}).get("startLine")

    lock = project / "kernels.lock"
    [stale] = found["stale-lock"]
    assert stale["level"] == "error" and where(stale) == ("pyproject.toml", line_of(pyproject, UNIVERSAL))
    assert stale["properties"]["fix"] == "kernlock lock" and "(fix: kernlock lock)" in stale["message"]["text"]
    [expired] = found["expired-ignore"]
    assert where(expired) == ("pyproject.toml", line_of(pyproject, "KC-2026-1085"))
    assert "expired on 2026-01-31" in expired["message"]["text"]
    advised = found["advised-build"]
    assert advised and all(e["level"] == "error" and e["properties"]["advisory"] == "KC-2026-1085" for e in advised)
    entry = line_of(lock, f'spec = "{V3}"')  # each advised variant's own line in the v3 entry
    assert {where(e) for e in advised} == {
        ("kernels.lock", line_of(lock, f'name = "{e["properties"]["variant"]}"', after=entry)) for e in advised}
    assert any(e["properties"].get("target") == ARM for e in found["uncovered-target"])
    assert all(where(e)[0] == "kernels.lock" and where(e)[1] for e in found["uncovered-target"])
    natives = found["native-fallback"]
    assert {e["properties"]["kernel"] for e in natives} >= {LIGER} and all(e["level"] == "note" for e in natives)
    recorded = {(k.spec, n.split(": ", 1)[0]) for k in load_lockfile(lock).kernels for n in k.native}
    assert {(e["properties"]["kernel"], e["properties"]["target"]) for e in natives} == recorded
    assert (LIGER, CU126) in recorded
    [liger] = [e for e in natives if e["properties"]["kernel"] == LIGER and e["properties"]["target"] == CU126]
    assert where(liger) == ("kernels.lock", line_of(lock, f'spec = "{LIGER}"'))


def test_a_passing_verify_is_a_valid_log_without_errors(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[V3], targets=[CUDA_X86])
    assert cli("lock", cwd=project).exit_code == 0
    result = cli("verify", "--all-targets", "--format", "sarif", cwd=project)
    assert result.exit_code == 0, result.output
    [run] = valid_sarif(result.stdout)["runs"]
    assert all(entry["level"] == "note" for entry in run["results"])
    as_json = cli("verify", "--all-targets", "--format", "json", cwd=project)
    assert json.loads(as_json.output) == json.loads(cli("verify", "--all-targets", "--json", cwd=project).output)
    both = cli("verify", "--json", "--format", "sarif", cwd=project)  # --json: the error as JSON
    assert both.exit_code == 2 and json.loads(both.output)["error"]["problem"] == (
        "--json and --format sarif ask for two formats")
    assert json.loads(both.output)["error"]["fix"] == "drop --json: --format sarif"  # what ran just above


def test_an_unreadable_lock_is_a_valid_log_exiting_2(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[V3], targets=[CUDA_X86])
    (project / "kernels.lock").write_text('version = "1.0"\ntargets = 3\n')
    result = cli("verify", "--format", "sarif", cwd=project)
    assert result.exit_code == 2
    [run] = valid_sarif(result.stdout)["runs"]
    [entry] = run["results"]
    assert entry["ruleId"] == "KL001" and entry["level"] == "error"
    assert entry["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "kernels.lock"


def test_the_how_to_block_runs_as_written(hub: TestHub, tmp_path: Path) -> None:
    """docs/how-to/sarif.md's command, verbatim: the log is written and valid whether verify passes (exit 0) or
    finds a stale lock (exit 1)."""
    [block] = markdown_blocks((REPO_ROOT / "docs" / "how-to" / "sarif.md").read_text(), "bash")
    project = make_project(tmp_path / "p", kernels=[V3], targets=[CUDA_X86])
    assert cli("lock", cwd=project).exit_code == 0
    passed = run_bash(block, project)
    assert passed.returncode == 0, passed.stderr
    assert not [r for r in valid_sarif((project / "kernels-lock.sarif").read_text())["runs"][0]["results"]
                if r["level"] == "error"]
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'"{V3}"', f'"{V3}", "{UNIVERSAL}"'))
    failed = run_bash(block, project)
    assert failed.returncode == 1, failed.stderr
    [run] = valid_sarif((project / "kernels-lock.sarif").read_text())["runs"]
    assert [r["ruleId"] for r in run["results"] if r["level"] == "error"] == ["KL002"]
