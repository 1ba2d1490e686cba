"""Typos are caught with a suggestion (issue 46, item 6): a misspelled command, `[tool.kernlock]` key and
`[tool.kernlock]` table, repo (the project's, else the org's on the Hub; a scanned one with its file:line), `explain`
argument, `[tool.kernlock.overrides]` table, key and value; each printed fix is run, and a misspelled key's fix
renames it, keeping what it held."""

from __future__ import annotations

import re
from pathlib import Path

import tomlkit

from helpers import ACTIVATION, CPU, CU128_ON_V2, CUDA_X86, FA2, UNIVERSAL, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import rev_parse
from kernlock.testing.hub import TestHub


def _pyproject(root: Path, table: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "0"\n\n{table}\n')
    return root


def test_a_misspelled_command_gets_a_suggestion() -> None:
    result = cli("lok")
    assert result.exit_code == 2 and "No such command 'lok'. Did you mean 'lock'?" in result.output, result.output
    assert "Did you mean" not in cli("frobnicate").output  # nothing near: no guess


def test_a_misspelled_kernlock_table_is_refused_not_ignored(hub: TestHub, tmp_path: Path) -> None:
    project = _pyproject(tmp_path / "p", f'[tool.kernlok]\nkernels = ["{UNIVERSAL}@v1"]\ntargets = ["{CPU}"]')
    result = cli("lock", cwd=project)
    assert result.exit_code != 0, result.output  # was: "no kernel specs found"
    assert "[tool.kernlok] is not read by kernlock (did you mean [tool.kernlock]?)" in result.output, result.output
    fix = re.search(r"fix: rename the table \[tool\.(\S+)\] to \[tool\.(\S+)\] in pyproject\.toml", result.output)
    assert fix is not None and fix.groups() == ("kernlok", "kernlock"), result.output
    assert not (project / "kernels.lock").exists()
    # the fix, applied as data: the table renamed, its settings kept
    document = tomlkit.parse((project / "pyproject.toml").read_text())
    tool = document["tool"]
    tool[fix.group(2)] = tool.pop(fix.group(1))
    (project / "pyproject.toml").write_text(tomlkit.dumps(document))
    assert cli("lock", cwd=project).exit_code == 0
    assert load_lockfile(project / "kernels.lock").kernel(f"{UNIVERSAL}@v1") is not None


def test_a_misspelled_key_is_named_with_its_suggestion_and_the_fix_keeps_the_value(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{UNIVERSAL}@v1"], targets=[CPU])
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace("\ntargets =", "\ntarget ="))
    result = cli("lock", cwd=project)
    assert result.exit_code != 0 and "unknown key [tool.kernlock] target (did you mean targets?)" in result.output
    fix = re.search(r"fix: rename (\S+) to (\S+) in \[tool\.kernlock\]", result.output)
    assert fix is not None and fix.groups() == ("target", "targets"), result.output
    # the fix, applied as data: the key renamed, its value kept
    document = tomlkit.parse((project / "pyproject.toml").read_text())
    table = document["tool"]["kernlock"]
    table[fix.group(2)] = table.pop(fix.group(1))
    (project / "pyproject.toml").write_text(tomlkit.dumps(document))
    assert cli("lock", cwd=project).exit_code == 0
    assert f'targets = ["{CPU}"]' in (project / "pyproject.toml").read_text()


def _fix(output: str) -> str:
    found = re.search(r"fix: (.+)$", output.strip())
    assert found is not None, output
    return found.group(1)


def _command(output: str) -> list[str]:
    """The `kernlock …` command a fix names, as arguments."""
    found = re.fullmatch(r"`kernlock (.+)`", _fix(output))
    assert found is not None, output
    return found.group(1).split()


def test_a_misspelled_repo_gets_the_project_s_repo_it_means(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v4"], targets=[CPU])
    result = cli("lock", "kernels-comunity/flash-attn2@v4", cwd=project)
    assert result.exit_code != 0
    assert ("kernels-comunity/flash-attn2: repository not found on the Hub (from command line); "
            f"did you mean {FA2}?") in result.output, result.output
    assert _command(result.output) == ["lock", f"{FA2}@v4"]
    assert "comunity" not in (project / "pyproject.toml").read_text()  # nothing kept of the typo
    assert cli(*_command(result.output), cwd=project).exit_code == 0


def test_a_repo_not_found_gets_one_the_hub_lists_for_its_org(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{UNIVERSAL}@v1"], targets=[CPU])
    result = cli("lock", "kernels-community/activaton@v1", cwd=project)
    assert result.exit_code != 0 and f"did you mean {ACTIVATION}?" in result.output, result.output
    assert hub.requests["list"] == 1  # the org's kernel repos, as the Hub lists them
    fixed = cli(*_command(result.output), cwd=project)
    assert fixed.exit_code == 0, fixed.output
    assert load_lockfile(project / "kernels.lock").kernel(f"{ACTIVATION}@v1") is not None
    # nothing near in the project nor the org: no guess
    unknown = cli("lock", "kernels-community/zzzz", cwd=project)
    assert unknown.exit_code != 0 and "did you mean" not in unknown.output


def test_a_scanned_misspelled_repo_is_named_with_its_file_and_line(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v4"], targets=[CPU])
    train = project / "train.py"
    train.write_text("from transformers import AutoModelForCausalLM\n"
                     "model = AutoModelForCausalLM.from_pretrained(\n"
                     '    "m", attn_implementation="kernels-community/flash-atn2@v4")\n')
    result = cli("lock", "--scan", "train.py", cwd=project)
    assert result.exit_code != 0
    assert "kernels-community/flash-atn2: repository not found on the Hub (from train.py:3)" in result.output
    fix = re.fullmatch(r"write (\S+) instead of (\S+) at ([^:]+):(\d+)", _fix(result.output))
    assert fix is not None and fix.groups() == (f"{FA2}@v4", "kernels-community/flash-atn2@v4", "train.py", "3")
    lines = (project / fix.group(3)).read_text().splitlines(keepends=True)  # the fix, applied as data
    lines[int(fix.group(4)) - 1] = lines[int(fix.group(4)) - 1].replace(fix.group(2), fix.group(1))
    (project / fix.group(3)).write_text("".join(lines))
    assert cli("lock", "--scan", "train.py", cwd=project).exit_code == 0


def test_explain_of_an_unknown_repo_suggests_the_locked_one(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    result = cli("explain", "kernels-community/activaton", cwd=project)
    assert result.exit_code == 2
    assert f"kernels-community/activaton is not in the lock (did you mean {ACTIVATION}?)" in result.output
    explained = cli(*_command(result.output), cwd=project)
    assert explained.exit_code == 0 and f"{ACTIVATION}@v1 at " in explained.output


def _overrides_project(tmp_path: Path, override: str) -> Path:
    return make_project(tmp_path / "p", kernels=[FA2], targets=[CPU, CUDA_X86], extra=override)


def _cu128_is_pinned_to_v2(hub: TestHub, project: Path) -> bool:
    lock = load_lockfile(project / "kernels.lock")
    return lock.kernel(FA2, CUDA_X86).commit == rev_parse(hub.repo_path(FA2), "v2")


def test_a_near_miss_overrides_table_is_refused_and_its_fix_keeps_the_override(hub: TestHub, tmp_path: Path) -> None:
    project = _overrides_project(tmp_path, CU128_ON_V2.replace("kernlock.overrides.", "kernlock.override."))
    result = cli("lock", cwd=project)
    assert result.exit_code != 0 and "unknown key [tool.kernlock] override (did you mean overrides?)" in result.output
    fix = re.fullmatch(r"rename (\S+) to (\S+) in \[tool\.kernlock\]", _fix(result.output))
    assert fix is not None and fix.groups() == ("override", "overrides")
    document = tomlkit.parse((project / "pyproject.toml").read_text())
    table = document["tool"]["kernlock"]
    table[fix.group(2)] = table.pop(fix.group(1))
    (project / "pyproject.toml").write_text(tomlkit.dumps(document))
    assert cli("lock", cwd=project).exit_code == 0 and _cu128_is_pinned_to_v2(hub, project)


def test_a_misspelled_override_key_is_renamed_keeping_the_pin(hub: TestHub, tmp_path: Path) -> None:
    project = _overrides_project(tmp_path, CU128_ON_V2.replace("revision =", "revison ="))
    result = cli("lock", "--json", cwd=project)
    assert result.exit_code == 2
    import json

    error = json.loads(result.output)["error"]
    assert error["problem"].endswith(f"[tool.kernlock.overrides.\"{FA2}\"][0]: unknown key 'revison' (did you mean "
                                     "revision?)"), error
    fix = re.fullmatch(r'rename (\S+) to (\S+) in \[tool\.kernlock\.overrides\."([^"]+)"\] \(entry (\d+)\) of '
                       r"pyproject\.toml", error["fix"])
    assert fix is not None and fix.groups() == ("revison", "revision", FA2, "1"), error["fix"]  # not "remove it"
    document = tomlkit.parse((project / "pyproject.toml").read_text())  # the fix, run by its data
    entry = document["tool"]["kernlock"]["overrides"][fix.group(3)][int(fix.group(4)) - 1]
    entry[fix.group(2)] = entry.pop(fix.group(1))
    (project / "pyproject.toml").write_text(tomlkit.dumps(document))
    assert 'revision = "v2"' in (project / "pyproject.toml").read_text()  # the pin kept
    assert cli("lock", cwd=project).exit_code == 0 and _cu128_is_pinned_to_v2(hub, project)


def test_an_override_value_no_build_has_is_refused_with_the_nearest(hub: TestHub, tmp_path: Path) -> None:
    project = _overrides_project(tmp_path, CU128_ON_V2.replace('backend = "cu128"', 'backend = "cu12B"'))
    result = cli("lock", cwd=project)
    assert result.exit_code != 0, result.output  # was: exit 0, the workaround silently off
    assert (f'[tool.kernlock.overrides."{FA2}"]: backend = "cu12B" matches no build of the locked commit and no '
            "target (they have cpu, cu126, cu128, cu130), so the override would never apply (did you mean "
            "cu128?); nothing was written") in result.output, result.output
    assert not (project / "kernels.lock").exists()
    fix = re.fullmatch(r'change (\w+) = "([^"]+)" to \w+ = "([^"]+)" in .* of pyproject\.toml', _fix(result.output))
    assert fix is not None and fix.groups() == ("backend", "cu12B", "cu128")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'{fix[1]} = "{fix[2]}"', f'{fix[1]} = "{fix[3]}"'))
    assert cli("lock", cwd=project).exit_code == 0 and _cu128_is_pinned_to_v2(hub, project)
    # the same typo made after locking: verify says so, with the same fix
    pyproject.write_text(pyproject.read_text().replace('backend = "cu128"', 'backend = "cu12B"'))
    verified = cli("verify", cwd=project)
    assert verified.exit_code == 1 and 'backend = "cu12B" matches no build' in verified.output, verified.output
    assert 'fix: change backend = "cu12B" to backend = "cu128"' in verified.output
