"""The lock's model: specs, targets, the lock and its dict form, overrides, identifier rules.

Pure: imports only `kernlock.errors` and itself.
"""
