"""Advisories a project accepts for now: `[tool.kernlock] ignore-advisories`, as cargo-deny's
`[advisories] ignore`.

    [tool.kernlock]
    ignore-advisories = [
        "KC-2026-1085",                                                  # ignored, no end date
        { id = "KC-2026-1090", until = 2027-01-31, reason = "only our inference jobs load it" },
    ]

`until` is a TOML date or its text (`"2027-01-31"`): the advisory is ignored through that day (UTC)
and applies again from the next, when `kernlock verify` fails on the expired ignore. `reason` is
optional and printed with it.
"""

from __future__ import annotations

import contextlib
import datetime
from dataclasses import dataclass
from typing import Any

from kernlock._internal.spec.advisories import refuse_unknown_keys
from kernlock._internal.spec.printable import printable
from kernlock.errors import ConfigError

KEY = "ignore-advisories"
_KEYS = {"id", "until", "reason"}
_FORMAT = (
    f'write it as {KEY} = ["<advisory id>", {{ id = "<advisory id>", until = "YYYY-MM-DD", '
    'reason = "..." }]'
)


@dataclass(frozen=True)
class AdvisoryIgnore:
    """One advisory id the project ignores, until a day (inclusive) or for good."""

    id: str
    until: datetime.date | None = None
    reason: str | None = None

    def expired(self, today: datetime.date) -> bool:
        """Whether `today` is past the last day of the ignore."""
        return self.until is not None and today > self.until


def today_utc() -> datetime.date:
    """The day an ignore is judged on."""
    return datetime.datetime.now(datetime.timezone.utc).date()


def parse_ignores(value: Any, source: str) -> tuple[AdvisoryIgnore, ...]:
    """`ignore-advisories` of `[tool.kernlock]` in `source`, validated; `ConfigError` names the bad
    entry."""
    if not isinstance(value, list):
        raise ConfigError(f"{source}: [tool.kernlock] {KEY} must be a list", fix=_FORMAT)
    ignores = [
        _ignore(item, f"{source}: [tool.kernlock] {KEY}[{i}]") for i, item in enumerate(value)
    ]
    ids = [ignore.id for ignore in ignores]
    twice = next((i for i in ids if ids.count(i) > 1), None)
    if twice is not None:
        raise ConfigError(
            f"{source}: [tool.kernlock] {KEY} names {twice} twice",
            fix=f"keep one entry for {twice} in {KEY}",
        )
    return tuple(ignores)


def _ignore(item: Any, where: str) -> AdvisoryIgnore:
    if isinstance(item, str):
        item = {"id": item}
    if not isinstance(item, dict):
        raise ConfigError(f"{where} must be an advisory id or a table", fix=_FORMAT)
    refuse_unknown_keys(item, _KEYS, where, _FORMAT)
    advisory_id, reason = item.get("id"), item.get("reason")
    if not isinstance(advisory_id, str) or not advisory_id.strip():
        raise ConfigError(f"{where}: give the advisory's id as a non-empty string", fix=_FORMAT)
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        raise ConfigError(f"{where}: give reason as a non-empty string", fix=_FORMAT)
    return AdvisoryIgnore(
        id=advisory_id.strip(),
        until=_date(item.get("until"), where),
        reason=printable(reason.strip()) if reason else None,  # printed by verify
    )


def _date(value: Any, where: str) -> datetime.date | None:
    if value is None:
        return None
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # not a date: refused below
            value = datetime.date.fromisoformat(value)
    if isinstance(value, datetime.datetime) or not isinstance(value, datetime.date):
        shown = repr(value) if isinstance(value, str) else value
        raise ConfigError(
            f"{where}: until = {shown} is not a date",
            fix='write the last day it is ignored as until = "YYYY-MM-DD"',
        )
    return value
