"""A cooldown (issue 48): `[tool.kernlock] exclude-newer` skips Hub commits newer than its cut-off, the lock
records the cut-off as a date, and `lock --check` gives the same answer on a later day."""

from __future__ import annotations

import shlex
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from helpers import ACTIVATION, CPU, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.resolve import cooldown
from kernlock.testing.fixtures import advance_branch, git, push_commit, rev_parse
from kernlock.testing.hub import TestHub

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
SPEC = f"{ACTIVATION}@v1"


def _at(monkeypatch: pytest.MonkeyPatch, moment: datetime) -> None:
    """Make `moment` the time relative cut-offs count back from."""
    monkeypatch.setattr(cooldown, "utc_now", lambda: moment)


def _project(root: Path, setting: str | None) -> Path:
    extra = f'exclude-newer = "{setting}"\n' if setting is not None else ""
    return make_project(root, kernels=[SPEC], targets=[CPU], extra=extra)


def _set(project: Path, setting: str) -> None:
    text = (project / "pyproject.toml").read_text()
    start = text.index("exclude-newer = ")
    end = text.index("\n", start)
    (project / "pyproject.toml").write_text(text[:start] + f'exclude-newer = "{setting}"' + text[end:])


@pytest.fixture
def day_old_head(hub: TestHub, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """activation's v1 (its commit, then from 2026-01-01) moved on a day before `NOW`, which is now:
    (the commit before, the head)."""
    repo = hub.repo_path(ACTIVATION)
    previous = rev_parse(repo, "v1")
    head = advance_branch(repo, "v1", date=NOW - timedelta(days=1))
    _at(monkeypatch, NOW)
    return previous, head


def _locked_commit(project: Path) -> str:
    [entry] = load_lockfile(project / "kernels.lock").kernels
    return entry.commit


def test_a_head_one_day_old_waits_under_seven_days_and_is_taken_under_zero(
    day_old_head: tuple[str, str], hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    previous, head = day_old_head
    project = _project(tmp_path / "p", "7 days")
    hub.reset_counts()

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    assert _locked_commit(project) == previous
    # one history listing carries the dates; the skipped head's tree is never listed
    api = {kind: n for kind, n in hub.requests.items() if kind not in ("resolve", "cdn", "agent-registry")}
    assert api == {"refs": 1, "commits": 1, "tree": 1, "overview": 1}, api
    lock = load_lockfile(project / "kernels.lock")
    assert lock.version == "1.5"
    assert lock.exclude_newer is not None
    assert (lock.exclude_newer.date, lock.exclude_newer.span) == ("2026-05-25T12:00:00Z", "P7D")
    text = (project / "kernels.lock").read_text()
    assert '[exclude-newer]\ndate = "2026-05-25T12:00:00Z"\nspan = "P7D"\n' in text
    assert "1 newer commit skipped (exclude-newer 2026-05-25T12:00:00Z)" in text

    # the next day the same settings give the same lock: the date is the lock's, not now - 7 days
    _at(monkeypatch, NOW + timedelta(days=1))
    checked = cli("lock", "--check", cwd=project)
    assert checked.exit_code == 0, checked.output
    assert (project / "kernels.lock").read_text() == text

    # a changed setting re-resolves: "0 days" is now, and the head is older than now
    _set(project, "0 days")
    relocked = cli("lock", cwd=project)
    assert relocked.exit_code == 0, relocked.output
    assert _locked_commit(project) == head
    assert f"{SPEC}  {previous[:12]} -> {head[:12]}" in relocked.output
    assert load_lockfile(project / "kernels.lock").exclude_newer.span == "PT0S"  # type: ignore[union-attr]


def test_the_newest_older_commit_without_the_targets_build_is_passed_over(
    hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = hub.repo_path(ACTIVATION)
    previous = rev_parse(repo, "v1")
    cpu_build = f"build/{CPU.replace('torch2.13', 'torch213')}"
    paths = git(repo, "ls-tree", "-r", "--name-only", previous, cpu_build).decode().split()
    assert paths
    push_commit(repo, "v1", dict.fromkeys(paths), "Drop the CPU build", NOW - timedelta(days=10))
    advance_branch(repo, "v1", date=NOW - timedelta(days=1))
    _at(monkeypatch, NOW)
    project = _project(tmp_path / "p", "P7D")

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    assert _locked_commit(project) == previous
    assert "2 newer commits skipped" in (project / "kernels.lock").read_text()


def test_the_command_line_value_replaces_the_projects(day_old_head: tuple[str, str], tmp_path: Path) -> None:
    previous, head = day_old_head
    project = _project(tmp_path / "p", "7 days")

    assert cli("lock", "--exclude-newer", "24 hours", cwd=project).exit_code == 0
    assert _locked_commit(project) == head  # dated exactly 24 hours ago: at the cut-off is not newer
    assert cli("lock", "--exclude-newer", "2026-05-31", cwd=project).exit_code == 0
    assert _locked_commit(project) == previous
    assert load_lockfile(project / "kernels.lock").exclude_newer.date == "2026-05-31T00:00:00Z"  # type: ignore[union-attr]


def test_a_per_repo_cooldown_applies_to_its_repo(day_old_head: tuple[str, str], tmp_path: Path) -> None:
    previous, _ = day_old_head
    extra = f'exclude-newer = "0 days"\nexclude-newer-kernel = {{ "{ACTIVATION}" = "3 days" }}\n'
    project = make_project(tmp_path / "p", kernels=[SPEC], targets=[CPU], extra=extra)

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    assert _locked_commit(project) == previous
    cut = load_lockfile(project / "kernels.lock").exclude_newer
    assert cut is not None and cut.kernel_date == {ACTIVATION: "2026-05-29T12:00:00Z"}
    assert cut.kernel_span == {ACTIVATION: "P3D"}


def test_an_advisory_wins_over_the_cutoff(day_old_head: tuple[str, str], tmp_path: Path) -> None:
    previous, head = day_old_head
    project = make_project(tmp_path / "p", kernels=[SPEC], targets=[CPU],
                           extra='exclude-newer = "7 days"\nadvisories = ["advisories.toml"]\n')
    (project / "advisories.toml").write_text(f'''
[[advisory]]
id = "ORG-2"
repo = "{ACTIVATION}"
summary = "this build is broken"
[advisory.affected]
commits = ["{previous}"]
''')

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    assert _locked_commit(project) == head  # the nearest good commit, though newer than the cut-off
    assert "advised by ORG-2" in result.output


def test_no_commit_old_enough_is_one_line_whose_fix_works(
    hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _at(monkeypatch, datetime(2026, 1, 2, tzinfo=timezone.utc))  # the fixture commits are from 2026-01-01
    project = _project(tmp_path / "p", "7 days")

    result = cli("lock", cwd=project)

    assert result.exit_code == 1, result.output
    line, fix = result.output.strip().splitlines()[0], result.output.split("fix: ")[-1]
    assert "every commit of v1 is newer than the exclude-newer cut-off 2025-12-26T00:00:00Z" in line
    command = fix.split("`")[1]
    assert command == 'kernlock lock --exclude-newer "0 days"'
    fixed = cli(*shlex.split(command)[1:], cwd=project)
    assert fixed.exit_code == 0, fixed.output
    assert not (project / "kernels.lock").read_text().count("skipped")


@pytest.mark.parametrize("value", ["7 dayz", "yesterday", "2026-11-30T12:00:00"])
def test_a_bad_setting_is_one_line_naming_the_key(tmp_path: Path, value: str) -> None:
    project = _project(tmp_path / "p", value)

    result = cli("lock", cwd=project)

    assert result.exit_code == 2
    assert f"[tool.kernlock] exclude-newer: {value!r}" in result.output
    assert 'fix: write it as "7 days" (or a date, "2026-11-30")' in result.output


def test_fixture_commit_dates_reach_the_client_in_one_listing(tmp_path: Path) -> None:
    from kernlock._internal.hub.client import Hub
    from kernlock.testing.fixtures import build_fixture_repos, default_fixtures_dir

    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "templates").symlink_to(default_fixtures_dir() / "templates")
    (fixtures / "org__dated.toml").write_text('''repo = "org/dated"
template = "activation"
[[commits]]
label = "dated #1"
branch = "v1"
variants = ["torch213-cxx11-cpu-x86_64-linux"]
date = 2026-03-01T12:00:00Z
[[commits]]
label = "dated #2"
branch = "v1"
variants = ["torch213-cxx11-cpu-x86_64-linux"]
''')
    repos = build_fixture_repos(fixtures, tmp_path / "repos")
    with TestHub(repos, trusted_orgs={"org"}) as server:
        hub = Hub(endpoint=server.url)
        dated = hub.dated_commits("org/dated", "v1")
        assert [date for _, date in dated] == ["2026-01-01T02:00:00.000Z", "2026-03-01T12:00:00.000Z"]
        assert hub.commits("org/dated", "v1") == [commit for commit, _ in dated]
        assert server.requests["commits"] == 1  # memoised: the second call asked nothing


def test_verify_finds_a_lock_whose_cutoff_the_settings_no_longer_ask_for(day_old_head: tuple[str, str],
                                                                         tmp_path: Path) -> None:
    project = _project(tmp_path / "p", "7 days")
    assert cli("lock", cwd=project).exit_code == 0
    assert cli("verify", cwd=project).exit_code == 0

    _set(project, "3 days")
    stale = cli("verify", cwd=project)

    assert stale.exit_code == 1, stale.output
    assert ("[tool.kernlock] exclude-newer changed: the lock was resolved under 2026-05-25T12:00:00Z (P7D)"
            in stale.output)
    assert cli("lock", cwd=project).exit_code == 0  # the fix verify names
    assert cli("verify", cwd=project).exit_code == 0
