"""Specs to a lock: the resolver and `lock()` / `remove()`.

Imports check and below; never runtime.
"""
