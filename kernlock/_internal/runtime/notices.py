"""What the loader patch says once per process: a warning (logged) or a note (on stderr, whatever
logging the program configured)."""

from __future__ import annotations

import logging
import sys

from kernlock._internal.runtime.state import BOOK

logger = logging.getLogger("kernlock")


def first_time(key: str) -> bool:
    """Whether `key` is said for the first time in this process (then it is remembered)."""
    with BOOK.mutex:
        if key in BOOK.warned:
            return False
        BOOK.warned.add(key)
        return True


def warn_once(key: str, message: str) -> None:
    if first_time(key):
        logger.warning(message)


def note_once(key: str, message: str) -> None:
    """Print `message` on stderr once per process (and log it), whatever logging the program
    configured."""
    if first_time(key):
        print(message, file=sys.stderr, flush=True)
        logger.info(message)


def log_to_stderr() -> None:
    """With `$KERNLOCK_VERBOSE` set, print what `apply()` bound and every bound load to stderr."""
    from kernlock._internal.settings import verbose

    if not verbose():
        return
    if not any(getattr(handler, "_kernlock", False) for handler in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler._kernlock = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
