"""Text from data (an advisory file, a lock, the Hub) made safe to print on one line: control
characters (CR, LF, ESC, …) are shown escaped (`\\n`, `\\x1b`), so a value cannot forge output
lines (`ok   kernels-community/x`) or terminal escapes."""

from __future__ import annotations

import unicodedata

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """`text` with every control or format character escaped."""
    if text.isprintable():
        return text
    return "".join(
        _NAMED.get(char, f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")
        if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")
        else char
        for char in text
    )
