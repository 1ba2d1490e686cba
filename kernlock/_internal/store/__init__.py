"""What kernlock keeps on disk besides the lock file: the project mutex, the Hub cache of locked
variants (`hub_cache`: where they live, whether intact; the download engine is
`kernlock._internal.fetch.download`) and their metadata, the GC roots that keep locked commits in
that cache (`gc_roots`), the registry of locks (`registry`) and `kernlock cache` (`cache_gc`).
The lock file is `kernlock._internal.lockfile`; atomic writes and the private per-user directory are
`kernlock._internal.fs`.

Imports lockfile, hub, compat, model, fs, errors and settings.
"""
