"""The scenario suites: kills at every named step, hostile input, real faults, several processes
racing, and logs written by real brokers. Each runs real processes or many cases, so every test
here is marked ``slow``: the fast loop is ``pytest -m "not slow"``."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.fspath).parents:
            item.add_marker(pytest.mark.slow)
