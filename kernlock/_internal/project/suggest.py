"""Did-you-mean for a name that names nothing: a repo the project has not (a typo in `-P`, an
override, `use-kernels`), a `[tool.kernlock]` key or table, a command."""

from __future__ import annotations

from collections.abc import Iterable


def close_repo(name: str, repos: Iterable[str]) -> str | None:
    """The repo of `repos` that `name` most likely means (`difflib`, on the whole name, then on the
    part after the org, so `flash-attn2` and `kernels-community/flash-atn2` both find
    `kernels-community/flash-attn2`); None if none."""
    import difflib

    candidates = sorted(set(repos))
    match = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    if match:
        return match[0]
    by_name: dict[str, str] = {}
    for repo in candidates:
        by_name.setdefault(repo.rsplit("/", 1)[-1], repo)
    match = difflib.get_close_matches(name.rsplit("/", 1)[-1], list(by_name), n=1, cutoff=0.75)
    return by_name[match[0]] if match else None


def close_name(name: str, names: Iterable[str], cutoff: float = 0.7) -> str | None:
    """The one of `names` that `name` most likely misspells (`difflib`), or None."""
    import difflib

    match = difflib.get_close_matches(name, sorted(set(names)), n=1, cutoff=cutoff)
    return match[0] if match else None


def known_list(repos: Iterable[str], most: int = 5) -> str:
    """`repos` as a short sorted list for a message (`none` when empty)."""
    names = sorted(set(repos))
    return (", ".join(names[:most]) + ("…" if len(names) > most else "")) or "none"
