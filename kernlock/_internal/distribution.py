"""This installed distribution of kernlock: its version, read from the package metadata once, when
asked (not at import: the start-up hook imports kernlock in every process)."""

from __future__ import annotations

from functools import cache


@cache
def version() -> str:
    """kernlock's version as installed (`pip show kernlock`); `0+unknown` for a source tree on
    `sys.path` that was never installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("kernlock")
    except PackageNotFoundError:
        return "0+unknown"
