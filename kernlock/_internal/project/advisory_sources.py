"""Where a project's advisories come from: `[tool.kernlock] advisories`, files (relative to the
project) or URLs.

    [tool.kernlock]
    advisories = ["advisories.toml", "https://example.org/kernels-advisories.toml"]

The project's `ignore-advisories` (`kernlock._internal.spec.advisory_ignores`) set aside the
advisories they name until their `until` day: `project_advisories` splits the two.

A URL is fetched on each use with kernlock's Hub transport (its timeouts, deadline, size
bound and retries; no Hub token is sent), so `verify` reads a local file offline and a URL
only where the network is there. The file format is `kernlock._internal.spec.advisories`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kernlock._internal.spec.advisories import Advisory, parse_advisories
from kernlock._internal.spec.advisory_ignores import today_utc
from kernlock.errors import ConfigError, KernlockError

if TYPE_CHECKING:
    from kernlock._internal.project.config import Project

MAX_BYTES = 1 << 20  # one advisory file: a few hundred entries at most
FIX = "fix or remove it in [tool.kernlock] advisories"


def is_url(source: str) -> bool:
    return source.startswith(("https://", "http://"))


def load_advisories(root: Path, sources: tuple[str, ...]) -> tuple[Advisory, ...]:
    """Every advisory of every source, in order; an unreadable or invalid source is an error naming
    it."""
    from kernlock._internal.fs import tomlio

    advisories: list[Advisory] = []
    for source in sources:
        text = _fetch(source) if is_url(source) else _read(root, source)
        try:
            data = tomlio.loads(text)
        except ValueError as error:
            raise ConfigError(f"advisories {source}: not valid TOML ({error})", fix=FIX) from None
        try:
            found = parse_advisories(data, source)
        except ConfigError as error:
            raise ConfigError(
                error.message,
                fix=f"correct {source} (the format: docs/how-to/advisories.md) "
                "or remove it from [tool.kernlock] advisories",
            ) from None
        seen = {a.id: a.source for a in advisories}
        clash = next((a for a in found if a.id in seen), None)
        if clash is not None:
            raise ConfigError(
                f"advisory {clash.id} is declared in {seen[clash.id]} and in {source}", fix=FIX
            )
        advisories.extend(found)
    return tuple(advisories)


def project_advisories(project: Project) -> tuple[tuple[Advisory, ...], tuple[Advisory, ...]]:
    """The project's advisories: (those in force, those an unexpired ignore sets aside today)."""
    advisories = load_advisories(project.root, project.advisories)
    today = today_utc()
    ignored = {i.id for i in project.ignore_advisories if not i.expired(today)}
    return (
        tuple(a for a in advisories if a.id not in ignored),
        tuple(a for a in advisories if a.id in ignored),
    )


def _read(root: Path, source: str) -> str:
    """An advisory file's text: a regular file under `MAX_BYTES` (never `/dev/zero` or a FIFO)."""
    from kernlock._internal.fs.bounded_read import read_bounded

    path = root / source
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"advisories {source}: no such file ({path})", fix=FIX)
    try:
        return read_bounded(path, MAX_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"advisories {source}: cannot be read ({error})", fix=FIX) from None


def _fetch(url: str) -> str:
    from kernlock._internal.hub.transport import Transport, etag_timeout

    transport = Transport(token=False)  # a third-party URL never gets the Hub token
    try:
        response = transport.call(
            url,
            lambda deadline: transport.request(
                url, deadline, timeout=etag_timeout(), limit=MAX_BYTES, follow=True
            ),
        )
    except KernlockError as error:
        raise KernlockError(
            f"advisories {url}: cannot be fetched ({error.message})",
            fix="check the URL and the network, or point [tool.kernlock] advisories at a "
            "local copy",
        ) from None
    try:
        return response.content.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"advisories {url}: not UTF-8 text", fix=FIX) from None
