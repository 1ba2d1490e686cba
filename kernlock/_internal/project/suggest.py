"""Did-you-mean for a name that names nothing: a repo the project has not (a typo in `-P`, an
override, `use-kernels`), a `[tool.kernlock]` key or table, a command."""

from __future__ import annotations

from collections.abc import Iterable


def close_repo(name: str, repos: Iterable[str]) -> str | None:
    """The repo of `repos` that `name` most likely means: one of its org with a close name (a bare
    `flash-attn2` matches the name in any org), else one of its name under a close org
    (`kernels-comunity/relu`); never a mere shared org (`org/zzzz` does not mean `org/mra`)."""
    org, _, short = name.rpartition("/")
    split = [repo.rpartition("/") for repo in sorted(set(repos) - {name})]
    same_org: dict[str, str] = {}
    for other, _, other_name in split:
        if other == org or not org:
            same_org.setdefault(other_name, f"{other}/{other_name}")
    if (match := close_name(short, same_org, cutoff=0.75)) is not None:
        return same_org[match]
    same_name = {o: f"{o}/{n}" for o, _, n in split if n == short and org}
    if (match := close_name(org, same_name, cutoff=0.75)) is not None:
        return same_name[match]
    return None


def close_name(name: str, names: Iterable[str], cutoff: float = 0.7) -> str | None:
    """The one of `names` that `name` most likely misspells (`difflib`), or None."""
    import difflib

    match = difflib.get_close_matches(name, sorted(set(names)), n=1, cutoff=cutoff)
    return match[0] if match else None


def known_list(repos: Iterable[str], most: int = 5) -> str:
    """`repos` as a short sorted list for a message (`none` when empty)."""
    names = sorted(set(repos))
    return (", ".join(names[:most]) + ("…" if len(names) > most else "")) or "none"
