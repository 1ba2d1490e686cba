"""Issue 26: every public error is exported from `kernlock` and keeps its fix as data."""

from __future__ import annotations

import inspect
import pickle

import pytest

import kernlock
import kernlock.errors
from kernlock._internal.cli.options import error_json
from kernlock._internal.project.local_kernels import LOCAL_KERNELS_ENV, verify_findings
from kernlock.errors import NO_FIX, KernlockError, LockfileError, TrustError

pytestmark = pytest.mark.unit

PUBLIC = [c for c in vars(kernlock.errors).values() if inspect.isclass(c) and issubclass(c, KernlockError)]


@pytest.mark.parametrize("error", PUBLIC, ids=lambda c: c.__name__)
def test_every_error_is_exported_from_kernlock(error: type[KernlockError]) -> None:
    assert getattr(kernlock, error.__name__) is error and error.__name__ in kernlock.__all__


def test_the_fix_is_data_and_rendered_once() -> None:
    error = KernlockError("no variant for cpu", fix="kernlock lock --target cpu")
    assert (error.message, error.fix) == ("no variant for cpu", "kernlock lock --target cpu")
    assert str(error) == "no variant for cpu; fix: kernlock lock --target cpu"
    assert str(KernlockError("plain", fix=NO_FIX)) == "plain" and KernlockError("plain", fix=NO_FIX).fix is None
    copied = pickle.loads(pickle.dumps(error))  # crosses process boundaries (ranks, pools) intact
    assert (copied.message, copied.fix) == (error.message, error.fix)
    trusted = pickle.loads(pickle.dumps(TrustError.untrusted("org/k")))  # keyword-only constructors too
    assert (trusted.repo, trusted.fix) == ("org/k", TrustError.untrusted("org/k").fix)


def test_the_fix_is_a_required_keyword() -> None:
    with pytest.raises(TypeError):
        KernlockError("no fix given")  # type: ignore[call-arg]


def test_a_multi_line_problem_has_its_fix_on_a_line_of_its_own() -> None:
    assert str(KernlockError("ranks disagree:\n  table", fix="run one build")) == "ranks disagree:\n  table\nfix: run one build"


def test_json_errors_carry_the_problem_and_the_fix_apart() -> None:
    import json

    body = json.loads(error_json(KernlockError("no variant for cpu", fix="kernlock lock --target cpu")))["error"]
    assert (body["problem"], body["fix"]) == ("no variant for cpu", "kernlock lock --target cpu")
    assert body["message"] == "no variant for cpu; fix: kernlock lock --target cpu" and body["exit_code"] == 1
    assert json.loads(error_json(KernlockError("interrupted", fix=NO_FIX)))["error"]["fix"] is None
    located = json.loads(error_json(LockfileError("bad", key_path=("kernel", 0), source="kernels.lock", fix="undo")))
    assert located["error"] | {"message": None} == {
        "type": "LockfileError", "problem": "bad", "fix": "undo", "message": None, "exit_code": 2,
        "source": "kernels.lock", "key_path": ["kernel", 0]}


def test_a_lockfile_error_keeps_its_location_apart_from_the_fix() -> None:
    error = LockfileError("expected a string", key_path=("kernel", 0, "commit"), source="kernels.lock", fix="undo it")
    assert error.message == "kernels.lock: kernel[0].commit: expected a string"
    assert str(error) == "kernels.lock: kernel[0].commit: expected a string; fix: undo it"
    assert error.under("x").fix == "undo it"


def test_an_untrusted_publisher_names_the_repo_and_the_rerun() -> None:
    error = TrustError.untrusted("org/k", "org/k --target cpu")
    assert error.repo == "org/k" and "publisher 'org' is not a trusted kernel publisher" in error.message
    assert error.fix is not None and error.fix.startswith("`kernlock lock org/k --target cpu --trust org/k`")


def test_a_malformed_local_kernels_is_one_finding_with_its_fix_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOCAL_KERNELS_ENV, "no-equals-sign")
    [(blocking, message, fix)] = verify_findings(set(), strict=True)
    assert blocking and "fix" not in message and fix == f"{LOCAL_KERNELS_ENV}=org/repo=/path[:org/repo=/path]"
