"""Test support: fixture kernel repositories and a Hub-compatible test server."""

from kernlock.testing.fixtures import (
    advance_branch,
    build_fixture_repos,
    default_fixtures_dir,
    ensure_fixture_repos,
    move_branch,
    push_commit,
    rev_parse,
)
from kernlock.testing.hub import TestHub

__all__ = [
    "TestHub",
    "advance_branch",
    "build_fixture_repos",
    "default_fixtures_dir",
    "ensure_fixture_repos",
    "move_branch",
    "push_commit",
    "rev_parse",
]
