"""The start-up hook's excepthook: an uncaught refusal, however wrapped, is one `kernlock: error:` line in place of
the traceback; `KERNLOCK_VERBOSE=1` adds the traceback (docs/reference/cli.md, "Exit codes and errors")."""

from __future__ import annotations

import subprocess

import pytest

from kernlock._internal import settings
from kernlock._internal.runtime.autoapply import _refusals_in_one_line
from kernlock.errors import UnlockedKernelError

pytestmark = pytest.mark.unit


def _wrapped() -> RuntimeError:
    """A refusal re-raised by two libraries, as Transformers and TRL do."""
    try:
        try:
            raise UnlockedKernelError("kernel a/b is not in kernels.lock", fix="lock it with `kernlock lock a/b`")
        except UnlockedKernelError as refusal:
            raise ValueError("could not load the attention kernel") from refusal
    except ValueError as error:
        try:
            raise RuntimeError("training failed") from error
        except RuntimeError as outer:
            return outer


def _hook_output(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: BaseException,
                 verbose: str) -> tuple[str, list[BaseException]]:
    monkeypatch.setenv(settings.VERBOSE_ENV, verbose)
    passed_on: list[BaseException] = []
    hook = _refusals_in_one_line(lambda kind, value, traceback: passed_on.append(value))
    hook(type(error), error, error.__traceback__)
    return capsys.readouterr().err, passed_on


def test_a_wrapped_refusal_is_its_one_line_and_no_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    err, passed_on = _hook_output(monkeypatch, capsys, _wrapped(), "0")
    assert err == "kernlock: error: kernel a/b is not in kernels.lock; fix: lock it with `kernlock lock a/b`\n"
    assert passed_on == []


def test_verbose_adds_the_traceback_after_the_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    error = _wrapped()
    err, passed_on = _hook_output(monkeypatch, capsys, error, "1")
    assert err.startswith("kernlock: error: kernel a/b is not in kernels.lock") and passed_on == [error]


def test_a_launcher_relaying_the_childs_line_adds_nothing(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    relayed = subprocess.CalledProcessError(1, ["python", "train.py"], stderr="kernlock: error: kernel a/b is not in …\n")
    err, passed_on = _hook_output(monkeypatch, capsys, relayed, "0")
    assert err == "" and passed_on == []  # the child already printed the line


def test_any_other_error_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    error = KeyError("not ours")
    err, passed_on = _hook_output(monkeypatch, capsys, error, "0")
    assert err == "" and passed_on == [error]
