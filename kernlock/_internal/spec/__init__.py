"""The lock's vocabulary: specs, targets, overrides, identifier rules. The lock file itself is
`kernlock._internal.lockfile`.

Pure: imports only `kernlock.errors` and itself.
"""
