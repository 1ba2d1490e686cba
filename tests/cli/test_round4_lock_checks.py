"""Issue 44, reliability round 4: a hand-edited lock that the CI recipe used to pass.

Class 9: a variant's `archs` edited by hand are caught by `verify --remote` (the build's metadata.json at
the locked commit) and by `verify --cache` (the cached, hash-checked metadata.json). Class 10: a lock of a
Python-ABI build written for another Python fails `verify` with what `apply()` refuses at load.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import kernels
import pytest

import kernlock
from helpers import CPU, LockedProjectFactory, cli
from kernlock._internal.compat.kernels_api import line
from kernlock.errors import VariantMismatchError
from kernlock.testing.hub import TestHub

SM100 = "kernels-community/sm100-only"
CU130 = "torch2.13-cxx11-cu130-x86_64-linux"
CU130_VARIANT = "torch213-cxx11-cu130-x86_64-linux"
PYABI = "kernels-community/pyabi"
BUILD_39 = "torch-2.13-cpu-cpython-3.9-abi3-x86_64-linux"
BUILD_313 = "torch-2.13-cpu-cpython-3.13-abi3-x86_64-linux"

pytestmark = pytest.mark.usefixtures("release_and_unload_kernels")


def _problems(project: Path, *args: str) -> tuple[int, dict[str, list[dict]]]:
    result = cli("verify", "--json", *args, cwd=project)
    report = json.loads(result.output)
    return result.exit_code, {c["name"]: c["problems"] for c in report["checks"]}


def _edit_archs(project: Path) -> Path:
    path = project / "kernels.lock"
    text = path.read_text()
    assert text.count('archs = ["10.0"]') == 1
    path.write_text(text.replace('archs = ["10.0"]', 'archs = ["8.0", "10.0"]'))
    return path


ARCHS_LINE = (f'{CU130_VARIANT}: the lock records archs ["8.0", "10.0"], but its metadata.json {{where}} '
              'lists ["10.0"]')


def test_hand_edited_archs_fail_verify_remote(locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{SM100}@v1"], targets=[CU130, CPU])
    entry = lock.kernel(f"{SM100}@v1")
    assert entry is not None
    assert cli("verify", "--all-targets", "--remote", cwd=project).exit_code == 0
    _edit_archs(project)
    # `lock --check` keeps pins without reading the Hub (by design): the Hub-reading check is the one to fail
    assert cli("lock", "--check", cwd=project).exit_code == 0
    code, problems = _problems(project, "--all-targets", "--remote")
    assert code == 1
    [problem] = problems["remote"]
    assert problem["message"] == f"{SM100}@v1: " + ARCHS_LINE.format(where=f"at {entry.commit[:12]}")
    assert problem["fix"] == f"kernlock lock -P {SM100}"
    text = cli("verify", "--all-targets", "--remote", cwd=project).output
    assert "Traceback" not in text and "the lock records archs" in text


def test_hand_edited_archs_fail_verify_cache_offline(locked_project: LockedProjectFactory,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    project, _ = locked_project([f"{SM100}@v1"], targets=[CU130, CPU])
    assert cli("sync", "--all-targets", cwd=project).exit_code == 0
    assert cli("verify", "--all-targets", "--cache", cwd=project).exit_code == 0
    _edit_archs(project)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: the check reads the cache only
    code, problems = _problems(project, "--all-targets", "--cache")
    assert code == 1
    [problem] = problems["cache"]
    assert problem["message"].startswith(f"{SM100}@v1 {CU130_VARIANT}: the lock records archs [\"8.0\", \"10.0\"]")
    assert problem["message"].endswith('lists ["10.0"]') and "\n" not in problem["message"]
    assert problem["fix"] == f"kernlock lock -P {SM100}"
    assert (problem["variant"], problem["target"]) == (CU130_VARIANT, CU130)


def test_removed_archs_are_caught_too(locked_project: LockedProjectFactory) -> None:
    project, _ = locked_project([f"{SM100}@v1"], targets=[CU130, CPU])
    path = project / "kernels.lock"
    path.write_text(path.read_text().replace('archs = ["10.0"]\n', ""))
    code, problems = _problems(project, "--all-targets", "--remote")
    assert code == 1 and 'the lock records archs [], but its metadata.json' in problems["remote"][0]["message"]


needs_python_abi = pytest.mark.skipif(not line().PYTHON_ABI, reason="kernels before 0.19 has no Python dimension")


@needs_python_abi
@pytest.mark.skipif(sys.version_info[:2] >= (3, 13), reason="the 3.13 build loads here")
def test_a_lock_written_on_python_3_13_fails_verify_as_apply_does(hub: TestHub,
                                                                 locked_project: LockedProjectFactory) -> None:
    """A plain target locked on 3.13 takes the cpython-3.13 build; on this older Python kernels loads the 3.9
    one, so `apply()` refuses the load and `verify` must fail the same way."""
    project, _ = locked_project([f"{PYABI}@v1"], targets=[f"{CPU}-cp313"])
    path = project / "kernels.lock"
    for file in (path, project / "pyproject.toml"):  # the lock as Python 3.13 writes it for the plain target
        file.write_text(file.read_text().replace(f"{CPU}-cp313", CPU))
    assert f'name = "{BUILD_313}"' in path.read_text()
    python = "{}.{}".format(*sys.version_info[:2])
    code, problems = _problems(project)
    assert code == 1
    [problem] = problems["coverage"]
    assert problem["message"] == (f"{PYABI}@v1: kernels would load {BUILD_39} on {CPU} with Python {python}, but "
                                  f"the lock records {BUILD_313}; the lock was written for another Python")
    assert problem["fix"] == f"kernlock lock -P {PYABI}"
    assert (problem["kernel"], problem["target"]) == (f"{PYABI}@v1", CPU)
    kernlock.apply(path)  # what verify now says, apply() refuses at load
    with pytest.raises(VariantMismatchError, match=f"kernels would load {BUILD_39} here, but the lock records {BUILD_313}") as refused:
        kernels.get_kernel(PYABI, version=1)
    assert refused.value.fix == f"run `kernlock lock -P {PYABI}`"  # the same working fix as verify's, not `--target`
    kernlock._internal.runtime.apply.release()
    # the fix works: the entry is locked again for this Python, and verify passes
    assert cli("lock", "-P", PYABI, cwd=project).exit_code == 0
    assert f'name = "{BUILD_39}"' in path.read_text()
    assert _problems(project)[0] == 0


@needs_python_abi
def test_a_python_abi_lock_for_this_python_passes_verify(locked_project: LockedProjectFactory) -> None:
    project, _ = locked_project([f"{PYABI}@v1"], targets=[f"{CPU}-cp313", f"{CPU}-cp310"])
    assert cli("verify", "--all-targets", cwd=project).exit_code == 0
