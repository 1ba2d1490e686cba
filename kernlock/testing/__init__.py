"""Test support: fixture kernel repositories and a Hub-compatible test server."""

from kernlock.testing.fixtures import (
    advance_branch,
    build_fixture_repos,
    default_fixtures_dir,
    move_branch,
    push_commit,
    rev_parse,
)

__all__ = [
    "advance_branch",
    "build_fixture_repos",
    "default_fixtures_dir",
    "move_branch",
    "push_commit",
    "rev_parse",
]
