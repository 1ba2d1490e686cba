"""Reading TOML the same way on every Python: `tomllib` where it exists, tomlkit on 3.10."""

from __future__ import annotations

from typing import Any

TOO_DEEP = "nested too deeply to read"


def loads(text: str) -> dict[str, Any]:
    """Parse TOML text into plain Python values; any syntax error, or nesting past the parser's
    depth, is a `ValueError`."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomlkit
        from tomlkit.exceptions import ParseError

        try:
            return tomlkit.parse(text).unwrap()
        except ParseError as error:
            raise ValueError(str(error)) from None
        except RecursionError:
            raise ValueError(TOO_DEEP) from None
    try:
        return tomllib.loads(text)
    # the parsers recurse per level: the interpreter's recursion limit is the bound
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
