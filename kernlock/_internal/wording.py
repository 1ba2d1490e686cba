"""Counting words in messages: `1 kernel`, `2 kernels`."""


def plural(count: int, noun: str) -> str:
    """`1 kernel`, `2 kernels`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
