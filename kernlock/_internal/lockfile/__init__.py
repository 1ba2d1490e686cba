"""The lock file, `kernels.lock`: its model (`Lockfile` at the centre, in `model`), its dict form
(`table`), reading and writing it (`serialize`, `read_bytes`), the parse cache, kernels' JSON lock
(`kernels_json`), per-target pins and a run's record of what it loaded.

Imports compat, model, fs, errors and settings.
"""
