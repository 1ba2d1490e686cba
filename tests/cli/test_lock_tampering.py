"""A hand-edited lock cannot smuggle in another repo: aliases are validated, `verify --remote` re-derives the rest."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import kernlock
from helpers import CPU, FA2, UNTRUSTED, LockedProjectFactory, cli
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.errors import LockfileError


def remote_problems(project: Path) -> list[str]:
    result = cli("verify", "--remote", "--json", cwd=project)
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    return [p["message"] for c in report["checks"] if c["name"] == "remote" for p in c["problems"]]


def test_an_alias_that_is_not_a_recorded_rename_is_refused(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{UNTRUSTED}@v1"], extra=f'trust = ["{UNTRUSTED}"]\n', targets=[CPU]).path
    path = project / "kernels.lock"
    path.write_text(path.read_text().replace(f'repo = "{UNTRUSTED}"\n', f'repo = "{UNTRUSTED}"\naliases = ["{FA2}"]\n'))
    result = cli("verify", cwd=project)
    assert result.exit_code == 2
    assert "kernel[0].aliases" in result.output and "not a rename recorded at lock time" in result.output


def test_verify_remote_catches_a_forged_rename_hash_and_trust(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{UNTRUSTED}@v1"], extra=f'trust = ["{UNTRUSTED}"]\n', targets=[CPU]).path
    path = project / "kernels.lock"
    genuine = path.read_text()
    assert cli("verify", "--remote", cwd=project).exit_code == 0

    # An alias shaped like a rename (spec names it) that the Hub never redirected.
    forged = genuine.replace(f'spec = "{UNTRUSTED}@v1"', f'spec = "{FA2}@v1"').replace(
        f'repo = "{UNTRUSTED}"\n', f'repo = "{UNTRUSTED}"\naliases = ["{FA2}"]\n')
    forged = forged.replace(f'inputs = ["{UNTRUSTED}@v1"]', f'inputs = ["{FA2}@v1"]')
    path.write_text(forged)
    assert load_lockfile(path).kernels[0].aliases == (FA2,)
    assert any(f"alias {FA2} is not a rename of {UNTRUSTED}" in p for p in remote_problems(project))

    # A file hash edited by hand (a valid sha256, just not the Hub's).
    lock = load_lockfile(project / "kernels.lock")
    locked_file = lock.kernels[0].variants[0].files[0]
    path.write_text(genuine.replace(locked_file.sha256, "0" * 64))
    assert any(locked_file.path in p and "the Hub has sha256" in p for p in remote_problems(project))

    # Trust claimed for a publisher the Hub does not trust.
    path.write_text(genuine.replace('trust = "allowlist"', 'trust = "trusted-publisher"'))
    assert any("does not mark 'untrusted-org' as a trusted kernel publisher" in p for p in remote_problems(project))


def test_an_invalid_hand_edit_names_its_key_path_and_the_recommended_fix_works(
    locked_project: LockedProjectFactory,
) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU]).path
    path = project / "kernels.lock"
    sha256 = load_lockfile(path).kernels[0].variants[0].files[0].sha256
    path.write_text(path.read_text().replace(sha256, sha256.upper()))
    result = cli("verify", cwd=project)
    assert result.exit_code == 2
    assert "kernel[0].variant[0].files[0].sha256: expected 64 lower-case hex characters" in result.output
    fix = re.findall(r"`kernlock ([^`]+)`", result.output)[0]
    assert fix == "lock --upgrade"
    with pytest.raises(LockfileError) as raised:  # re-locking keeps pins, so it refuses, with the key path as data
        kernlock.lock(project)
    assert raised.value.key_path == ("kernel", 0, "variant", 0, "files", 0, "sha256")
    assert "the existing pins cannot be kept" in str(raised.value) and str(raised.value).endswith("`kernlock lock --upgrade`")
    assert cli(*fix.split(), cwd=project).exit_code == 0
    assert cli("verify", cwd=project).exit_code == 0
    assert load_lockfile(path).kernels[0].variants[0].files[0].sha256 == sha256


@pytest.mark.parametrize("algorithm", ["md5", "bogus-algo"])
def test_an_unknown_digest_algorithm_in_the_lock_is_refused(locked_project, algorithm: str) -> None:
    """Issue 44, class 14: an algorithm kernlock does not check used to turn the metadata-digest check off."""
    project, _ = locked_project([f"{FA2}@v4"], [CPU])
    text = (project / "kernels.lock").read_text()
    assert 'digest = "sha256"' in text
    (project / "kernels.lock").write_text(text.replace('digest = "sha256"', f'digest = "{algorithm}"', 1))
    result = cli("verify", cwd=project)  # was: ok, with the metadata digest left unchecked
    assert result.exit_code == 2 and "FAIL lock: 1 problem" in result.output, result.output
    assert re.search(rf"kernel\[0\]\.variant\[\d+\]\.digest: unknown digest algorithm '{algorithm}' "
                     r"\(kernlock checks sha256, sha512\)", result.output), result.output
    assert "fix: undo the hand edit" in result.output
    (project / "kernels.lock").write_text(text)  # the fix: the hand edit undone
    assert cli("verify", cwd=project).exit_code == 0
