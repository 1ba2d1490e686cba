"""What kernlock keeps on disk: atomic writes, the private per-user directory, the project mutex,
the lock file (and its parse cache), kernels' JSON lock, the Hub cache of locked variants.

Imports hub, compat, model, errors and settings.
"""
