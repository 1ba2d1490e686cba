"""A cooldown (`exclude-newer`): the setting's text read as a date or a span, and dates as the lock
writes them.

The values uv's `exclude-newer` accepts: an RFC 3339 timestamp (`2026-11-30T12:00:00Z`), a date
(`2026-11-30`, midnight UTC), a friendly duration (`7 days`, `24 hours`, `1 week`) or an ISO 8601
duration (`P7D`, `PT24H`, `P1W`). A span is kept in its ISO 8601 form (`P7D`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_UNITS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_FRIENDLY = re.compile(
    r"(\d+)\s*(weeks?|w|days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)",
    re.IGNORECASE,
)
_ISO = re.compile(r"P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
ACCEPTED = (
    'an RFC 3339 date ("2026-11-30" or "2026-11-30T12:00:00Z"), a duration ("7 days", '
    '"24 hours", "1 week") or an ISO 8601 duration ("P7D", "PT24H")'
)


@dataclass(frozen=True)
class Cooldown:
    """One `exclude-newer` value: a fixed `date`, or a `span` back from the time of locking."""

    date: datetime | None = None
    span: str | None = None  # ISO 8601 (`P7D`)

    def cutoff(self, now: datetime) -> datetime:
        """The absolute cut-off this value means at `now`."""
        if self.date is not None:
            return self.date
        assert self.span is not None
        return now - timedelta(seconds=span_seconds(self.span))


def _iso_span(seconds: int) -> str:
    """`seconds` as an ISO 8601 duration: `P7D`, `PT36H`, `P1DT30M`, `PT0S`."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    time = "".join(f"{n}{u}" for n, u in ((hours, "H"), (minutes, "M"), (secs, "S")) if n)
    text = "P" + (f"{days}D" if days else "") + (f"T{time}" if time else "")
    return text if text != "P" else "PT0S"


def span_seconds(span: str) -> int:
    """The seconds of an ISO 8601 span as `parse_cooldown` writes it."""
    match = _ISO.fullmatch(span)
    if match is None or span in ("P", "PT"):
        raise ValueError(f"{span!r} is not an ISO 8601 duration")
    weeks, days, hours, minutes, secs = (int(g or 0) for g in match.groups())
    return (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + secs


def parse_cooldown(text: str) -> Cooldown:
    """`text` as a cooldown; `ValueError` naming what is accepted otherwise."""
    value = text.strip()
    if _DATE.match(value):
        try:
            return Cooldown(date=parse_date(value + ("T00:00:00Z" if len(value) == 10 else "")))
        except ValueError as error:
            raise ValueError(f"{text!r} {error}") from None
    if value.upper().startswith("P"):
        try:
            return Cooldown(span=_iso_span(span_seconds(value.upper())))
        except ValueError:
            pass
    else:
        parts = _FRIENDLY.findall(value)
        if parts and _FRIENDLY.sub("", value).replace(",", "").strip() == "":
            seconds = sum(int(n) * _UNITS[unit[0].lower()] for n, unit in parts)
            return Cooldown(span=_iso_span(seconds))
    raise ValueError(f"{text!r} is not {ACCEPTED}")


def parse_date(text: str) -> datetime:
    """An RFC 3339 timestamp (with its offset) as an aware UTC datetime; `ValueError` (saying what
    is wrong, without the text) otherwise."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("is not an RFC 3339 timestamp") from None
    if parsed.tzinfo is None:
        raise ValueError("has no time zone (end it with Z)")
    return parsed.astimezone(timezone.utc)


def format_date(moment: datetime) -> str:
    """A cut-off as the lock writes it: RFC 3339 in UTC, to the second (`2026-11-30T12:00:00Z`)."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
