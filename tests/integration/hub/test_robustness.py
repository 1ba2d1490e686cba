"""Robustness: network faults, hostile Hub answers, bad lock input, concurrency, secrets."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import CPU, FA2, LockedProjectFactory, cli, make_project
from kernlock._internal.lockfile.serialize import dumps_lockfile, load_lockfile, parse_lockfile
from kernlock.errors import LockfileError
from kernlock.testing.fixtures import push_commit
from kernlock.testing.hub import TestHub

SENTINEL = "hf_kernlockSENTINELtoken0123456789"


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


# ---------------------------------------------------------------- network faults


@pytest.mark.parametrize(
    ("kind", "params"),
    [("status", {"code": 429, "retry_after": 0.1}), ("status", {"code": 500}), ("status", {"code": 502}),
     ("status", {"code": 503}), ("reset", {}), ("truncate", {}), ("delay", {"seconds": 0.3})],
)
def test_transient_faults_are_retried_with_backoff(hub: TestHub, tmp_path: Path, kind: str, params: dict) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2", "kernels-community/tagged@v1"], targets=[CPU])
    hub.add_fault(kind, match="/tree/", times=2, **params)
    started = time.monotonic()
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert hub.fired[kind] == 2
    assert time.monotonic() - started < 20


def test_persistent_faults_fail_clearly_and_keep_the_old_lock(hub: TestHub,
                                                              locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU]).path
    before = (project / "kernels.lock").read_bytes()
    hub.reset_counts()
    hub.add_fault("status", match="/refs", times=100, code=429, retry_after=0.05)
    result = cli("lock", "--upgrade", cwd=project)
    assert result.exit_code == 1
    assert result.output.strip() == f"kernlock: error: {FA2}: the Hub answered HTTP 429; fix: try again later"
    assert hub.requests["refs"] == hub.fired["status"] == 4  # bounded
    assert (project / "kernels.lock").read_bytes() == before


# ---------------------------------------------------------------- hostile or broken Hub answers


def tree_entry(path: str, **extra) -> dict:
    return {"type": "file", "path": path, "oid": "a" * 40, "size": 10, **extra}


@pytest.mark.parametrize(
    ("listing", "problem"),
    [
        ([tree_entry("build/../../../etc/passwd")], "unsafe file path"),
        ([tree_entry("/build/x/metadata.json")], "unsafe file path"),
        ([tree_entry("build\\torch213-cxx11-cpu-x86_64-linux\\x.py")], "unsafe file path"),
        ([tree_entry("build/torch213-cxx11-cpu-x86_64-linux/a\x00b.py")], "unsafe file path"),
        ([tree_entry("build/-bad variant/x.py")], "unsafe variant name"),
        ([tree_entry(f"build/torch213-cxx11-cpu-x86_64-linux-{i}/x.py") for i in range(1500)], "more than kernlock accepts"),
        ([tree_entry("build/torch213-cxx11-cpu-x86_64-linux/x.py", oid="zz")], "invalid size or hash"),
        ([tree_entry("build/torch213-cxx11-cpu-x86_64-linux/x.so", lfs={"oid": "not-a-sha256", "size": 1})], "invalid size or hash"),
        ([{"type": "file", "path": "build/x/y.py"}], "malformed tree entry"),
        ({"not": "a list"}, "unexpected JSON"),
    ],
)
def test_hostile_tree_listings_are_rejected(hub: TestHub, tmp_path: Path, listing, problem: str) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    before = files_under(tmp_path)
    hub.add_fault("respond", match="/tree/", times=10, body=listing)
    result = cli("lock", cwd=project)
    assert result.exit_code == 1
    assert problem in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert hub.fired["respond"] >= 1
    assert files_under(tmp_path) == before  # nothing written: no lock, nothing outside the cache


def test_refs_to_missing_commits_and_non_hex_shas(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    refs = {"branches": [{"name": "v2", "ref": "refs/heads/v2", "targetCommit": "f" * 40}], "tags": [], "converts": []}
    hub.add_fault("respond", match="/refs", times=1, body=refs)
    result = cli("lock", cwd=project)
    assert result.exit_code == 1 and "v2 points at commit ffffffffffff, which the Hub cannot list" in result.output
    assert hub.fired["respond"] == 1
    refs["branches"][0]["targetCommit"] = "not-a-sha"
    hub.add_fault("respond", match="/refs", times=1, body=refs)
    result = cli("lock", cwd=project)
    assert result.exit_code == 1 and "which is not a commit SHA" in result.output
    assert hub.fired["respond"] == 2


@pytest.mark.parametrize(("content", "problem"), [(b"{not json", "not valid kernel metadata"), (b" " * (2 << 20), "more than")])
def test_malformed_or_oversized_metadata_is_rejected(hub: TestHub, tmp_path: Path, content: bytes, problem: str) -> None:
    repo = hub.repo_path("kernels-community/tagged")
    push_commit(repo, "dev", {"build/torch213-cxx11-cpu-x86_64-linux/metadata.json": content}, "break metadata")
    project = make_project(tmp_path / "p", kernels=["kernels-community/tagged@dev"], targets=[CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code == 1
    assert "metadata.json" in result.output and problem in result.output


def test_a_lock_never_writes_outside_its_cache(locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU]).path
    text = (project / "kernels.lock").read_text()
    evil = text.replace('path = "metadata.json"', 'path = "../../../../evil.json"', 1)
    (project / "kernels.lock").write_text(evil)
    result = cli("sync", cwd=project)
    assert result.exit_code == 2 and "is not a safe relative path" in result.output
    assert not list(tmp_path.rglob("evil.json"))


# ---------------------------------------------------------------- bad lock input (property-based)


def sample_text() -> str:
    from helpers import sample_lockfile

    return dumps_lockfile(sample_lockfile())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_locks_raise_only_lockfile_errors(data: st.DataObject) -> None:
    text = sample_text()
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        junk = data.draw(st.text(alphabet=st.sampled_from(list('=[]{}"\',.#\n abc0xff-\\<>')), min_size=1, max_size=6))
        if action == "delete":
            text = text[:position] + text[position + len(junk):]
        elif action == "insert":
            text = text[:position] + junk + text[position:]
        else:
            text = text[:position] + junk + text[position + len(junk):]
    try:
        parse_lockfile(text)
    except LockfileError as error:
        assert str(error) and "\n" not in str(error)


toml_scalars = st.one_of(st.integers(-5, 5), st.text(max_size=8), st.booleans(), st.floats(allow_nan=False))
toml_values = st.recursive(toml_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
    ["version", "targets", "inputs", "kernel", "spec", "repo", "commit", "variant", "files", "path", "sha256", "size", "trust", "resolution", "x"]
), inner, max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(document=st.dictionaries(st.sampled_from(["version", "targets", "inputs", "kernel", "resolved-with", "other"]), toml_values, max_size=5))
@pytest.mark.slow
def test_random_documents_raise_errors_with_a_key_path(document: dict) -> None:
    import tomlkit

    try:
        text = tomlkit.dumps(document)
    except Exception:
        return
    try:
        parse_lockfile(text)
    except LockfileError as error:  # always inside the document: the key path is data and leads the message
        assert error.key_path and str(error).startswith(f"kernels.lock: {error.key}: {error.problem}; "), str(error)


# ---------------------------------------------------------------- concurrency


def test_concurrent_locks_serialise_into_one_complete_lock(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2", "kernels-community/with-dep@v1", "kernels-community/tagged@v1"], targets=[CPU])
    hub.latency = 0.02
    procs = [
        subprocess.Popen([sys.executable, "-m", "kernlock", "lock", *(["--upgrade"] if i else [])], cwd=project,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    lock = load_lockfile(project / "kernels.lock")
    assert {k.spec for k in lock.kernels} == {f"{FA2}@v2", "kernels-community/with-dep@v1", "kernels-community/tagged@v1", "kernels-community/activation@v1"}
    assert not [p for p in project.iterdir() if p.name.startswith(".kernels.lock")]


# ---------------------------------------------------------------- secrets and private repos


def run_cli(project: Path, *args: str, token: str = SENTINEL) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernlock", *args], cwd=project, capture_output=True, text=True,
                          env={**os.environ, "HF_TOKEN": token}, timeout=120)


@pytest.mark.slow
def test_token_is_sent_but_never_written_or_printed(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU])
    outputs = [run_cli(project, "lock", "--json"), run_cli(project, "verify", "--json"), run_cli(project, "sync"),
               run_cli(project, "show", "--json")]
    assert all(out.returncode == 0 for out in outputs), [o.stderr for o in outputs]
    assert f"Bearer {SENTINEL}" in hub.authorizations
    hub.add_fault("status", match="/refs", times=10, code=500)
    failed = run_cli(project, "lock", "--upgrade")
    assert failed.returncode == 1 and hub.fired["status"] >= 1
    texts = [o.stdout + o.stderr for o in (*outputs, failed)] + [p.read_text(errors="replace") for p in files_under(project)]
    assert not any(SENTINEL in text for text in texts)


@pytest.mark.parametrize(("code", "error_code"), [(401, None), (403, "GatedRepo")])
def test_private_or_gated_repos_say_how_to_authenticate(hub: TestHub, tmp_path: Path, code: int, error_code: str | None) -> None:
    project = make_project(tmp_path / "p", kernels=["kernels-community/tagged@v1"], targets=[CPU])
    headers = {"X-Error-Code": error_code} if error_code else {}
    hub.add_fault("respond", match="/refs", times=10, status=code, body={"error": "Access to this repo is restricted"}, headers=headers)
    result = run_cli(project, "lock")
    assert result.returncode == 1 and hub.fired["respond"] >= 1
    message = result.stderr.strip()
    assert "kernels-community/tagged" in message and f"HTTP {code}" in message
    assert "HF_TOKEN" in message and "hf auth login" in message
    assert SENTINEL not in message
