"""kernlock's private inside: every layer below the facade (`kernlock/__init__.py`).

Nothing here is public API; import what is public from `kernlock`. The layers, lowest first:
errors (at the top, public), settings, fs, model, host, compat, lockfile, hub, store, project,
check, resolve/fetch, runtime, cli. `tests/unit/test_layers.py` holds the ranks.
"""
