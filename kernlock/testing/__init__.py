"""Test support: fixture kernel repositories (`kernlock.testing.fixtures`) and a Hub-compatible test
server (`kernlock.testing.hub`, also `python -m kernlock.testing.hub`; its storage in `git_repo`,
its answers in `endpoints`, its HTTP side in `handler`)."""
