"""The runtime tests: `apply()`, `kernlock run` and the import hooks, in this process and in the ones it starts."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _release(release_applied_lock: None) -> None:
    """Each test leaves no lock applied in this process."""
