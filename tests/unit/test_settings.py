"""Issue 26: every environment variable is read through `kernlock._internal.settings`, with one grammar and one-line errors."""

from __future__ import annotations

import pytest

from kernlock._internal import settings
from kernlock._internal.fs import private
from kernlock._internal.project.local_kernels import allowed
from kernlock._internal.project.strict import strict_from_env
from kernlock.errors import UsageError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value", ["1", "true", "YES", "on", " On "])
def test_every_true_word_is_true(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(settings.APPLY_ENV, value)
    monkeypatch.setenv(settings.STRICT_ENV, value)
    monkeypatch.setenv(settings.ALLOW_LOCAL_ENV, value)
    assert settings.apply_requested() and strict_from_env() and allowed()


@pytest.mark.parametrize("value", ["0", "false", "No", "off"])
def test_every_false_word_is_false(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(settings.APPLY_ENV, value)
    monkeypatch.setenv(settings.STRICT_ENV, value)  # `off` used to leave strict mode on
    monkeypatch.setenv(settings.NO_CACHE_ENV, value)  # `false` used to turn the cache off
    assert not settings.apply_requested() and not strict_from_env() and private.cache_root() is not None


def test_unset_or_empty_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.STRICT_ENV, raising=False)
    monkeypatch.setenv(settings.APPLY_ENV, "")
    assert strict_from_env() and not settings.apply_requested()


@pytest.mark.parametrize("name", [settings.APPLY_ENV, settings.STRICT_ENV, settings.ALLOW_LOCAL_ENV,
                                  settings.NO_CACHE_ENV, settings.RANK_CHECK_ENV, settings.VERBOSE_ENV])
def test_any_other_value_is_a_one_line_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "maybe")
    with pytest.raises(UsageError) as raised:
        settings.flag(name, True)
    message = str(raised.value)
    assert "\n" not in message and f"${name}='maybe' is not one of 1/true/yes/on or 0/false/no/off" in message
    assert raised.value.fix is not None and raised.value.fix.startswith("set it to e.g. 0")


@pytest.mark.parametrize("value, zero, expected", [("2.5", False, 2.5), (" 7 ", False, 7.0), ("0", True, 0.0)])
def test_seconds(monkeypatch: pytest.MonkeyPatch, value: str, zero: bool, expected: float) -> None:
    monkeypatch.setenv(settings.DEADLINE_ENV, value)
    assert settings.seconds(settings.DEADLINE_ENV, 600.0, zero=zero) == expected


@pytest.mark.parametrize("value", ["soon", "5m", "-1", "0", "inf", "nan"])
def test_a_bad_seconds_value_is_a_one_line_error_not_a_silent_default(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(settings.DEADLINE_ENV, value)
    with pytest.raises(UsageError, match=rf"^\$KERNLOCK_HUB_DEADLINE='{value}' is not a number of seconds above 0; "
                                         r"fix: set it to e\.g\. 600 or unset it$"):
        settings.seconds(settings.DEADLINE_ENV, 600.0)


def test_paths(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv(settings.CACHE_DIR_ENV, str(tmp_path / "c"))
    monkeypatch.delenv(settings.NO_CACHE_ENV, raising=False)
    assert private.cache_root() == tmp_path / "c"
    monkeypatch.setenv(settings.NO_CACHE_ENV, "on")
    assert private.cache_root() is None
    monkeypatch.setenv(settings.LOCKFILE_ENV, "")
    assert settings.path(settings.LOCKFILE_ENV) is None
