"""The unit layer: no HTTP, no subprocesses; `pytest -m unit` (or `pytest tests/unit`) runs it alone."""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if UNIT_DIR in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.unit)
